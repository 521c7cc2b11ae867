//! W12's work (every 64-row slice of `/scenes/points` with its labels, every value summed)
//! read by libhdf5 (through `hdf5-metno`) and by `hdf5-reader`, on 1 and 2 threads that
//! take slices from a shared counter; prints rows/s for each, the median of 3 passes after a
//! warm-up pass.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

const SLICE: usize = 64;

/// One reader: opens every file once, then reads slice `i` of file `f`, returning the sum.
trait Reader: Sync {
    fn rows(&self, file: usize) -> usize;
    fn read(&self, file: usize, start: usize) -> anyhow::Result<f64>;
}

struct Metno(Vec<(hdf5_metno::Dataset, hdf5_metno::Dataset)>);

impl Reader for Metno {
    fn rows(&self, file: usize) -> usize {
        self.0[file].1.shape()[0]
    }

    fn read(&self, file: usize, start: usize) -> anyhow::Result<f64> {
        use ndarray::s;
        let (points, labels) = &self.0[file];
        let end = (start + SLICE).min(self.rows(file));
        let x: ndarray::Array3<f32> = points.read_slice(s![start..end, .., ..])?;
        let y: ndarray::Array1<i64> = labels.read_slice(s![start..end])?;
        Ok(x.iter().map(|&v| f64::from(v)).sum::<f64>() + y.iter().map(|&v| v as f64).sum::<f64>())
    }
}

struct Pure(Vec<(hdf5_reader::Dataset, hdf5_reader::Dataset)>);

impl Reader for Pure {
    fn rows(&self, file: usize) -> usize {
        self.0[file].1.shape()[0] as usize
    }

    fn read(&self, file: usize, start: usize) -> anyhow::Result<f64> {
        use hdf5_reader::{SliceInfo, SliceInfoElem};
        let (points, labels) = &self.0[file];
        let end = (start + SLICE).min(self.rows(file)) as u64;
        let mut sel = SliceInfo::all(3);
        sel.selections[0] = SliceInfoElem::Slice {
            start: start as u64,
            end,
            step: 1,
        };
        let rows = SliceInfo {
            selections: vec![SliceInfoElem::Slice {
                start: start as u64,
                end,
                step: 1,
            }],
        };
        let x = points.read_slice::<f32>(&sel)?;
        let y = labels.read_slice::<i64>(&rows)?;
        Ok(x.iter().map(|&v| f64::from(v)).sum::<f64>() + y.iter().map(|&v| v as f64).sum::<f64>())
    }
}

/// One pass over every slice of every file on `threads` threads: rows per second.
fn pass(reader: &dyn Reader, files: usize, threads: usize) -> anyhow::Result<f64> {
    let slices: Vec<(usize, usize)> = (0..files)
        .flat_map(|f| (0..reader.rows(f)).step_by(SLICE).map(move |s| (f, s)))
        .collect();
    let rows: usize = (0..files).map(|f| reader.rows(f)).sum();
    let next = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| -> anyhow::Result<f64> {
                    let mut total = 0.0;
                    while let Some(&(f, s)) = slices.get(next.fetch_add(1, Ordering::Relaxed)) {
                        total += reader.read(f, s)?;
                    }
                    Ok(total)
                })
            })
            .collect();
        for w in workers {
            w.join()
                .map_err(|_| anyhow::anyhow!("a reader thread panicked"))??;
        }
        Ok(())
    })?;
    Ok(rows as f64 / started.elapsed().as_secs_f64())
}

fn main() -> anyhow::Result<()> {
    let files: Vec<String> = std::env::args().skip(1).collect();
    anyhow::ensure!(!files.is_empty(), "usage: hdf5_readers FILE.h5 ...");
    let metno = Metno(
        files
            .iter()
            .map(|f| {
                let file = hdf5_metno::File::open(f)?;
                Ok((
                    file.dataset("/scenes/points")?,
                    file.dataset("/scenes/labels")?,
                ))
            })
            .collect::<anyhow::Result<_>>()?,
    );
    let pure = Pure(
        files
            .iter()
            .map(|f| {
                let file = hdf5_reader::Hdf5File::open(f)?;
                Ok((
                    file.dataset("/scenes/points")?,
                    file.dataset("/scenes/labels")?,
                ))
            })
            .collect::<anyhow::Result<_>>()?,
    );
    // Both read the same values.
    for f in 0..files.len() {
        let (a, b) = (metno.read(f, 0)?, pure.read(f, 0)?);
        anyhow::ensure!(a == b, "{}: the readers differ ({a} and {b})", files[f]);
    }
    let readers: [(&str, &dyn Reader); 2] =
        [("hdf5-metno (libhdf5)", &metno), ("hdf5-reader", &pure)];
    for threads in [1, 2] {
        for (name, reader) in readers {
            pass(reader, files.len(), threads)?;
            let mut rates: Vec<f64> = (0..3)
                .map(|_| pass(reader, files.len(), threads))
                .collect::<anyhow::Result<_>>()?;
            rates.sort_by(f64::total_cmp);
            println!(
                "{name}, {threads} thread(s): {:.0} rows/s (min {:.0}, max {:.0})",
                rates[1], rates[0], rates[2]
            );
        }
    }
    Ok(())
}
