//! The h5py generator recipe, read natively and in parallel.
//!
//! The tf.data question this answers: a user's generator opens HDF5 files, reads rows of a
//! dataset and the matching labels, preprocesses them and yields `(X, y)`:
//!
//! ```text
//! def gen():
//!     for path in files:
//!         with h5py.File(path) as f:
//!             X, y = f["/scenes/points"], f["/scenes/labels"]
//!             for i in range(len(y)):
//!                 yield center(X[i]), y[i]
//! ds = tf.data.Dataset.from_generator(gen, ...).shuffle(256).batch(32)
//! ```
//!
//! It is slow because every read, decompression and preprocessing step runs on the
//! generator's one thread (and, in Python, under the GIL and libhdf5's lock). Here the files'
//! blocks of rows are read and decompressed on blocking threads, several at once
//! (`num_parallel_reads`), the preprocessing runs in a parallel map, and the pipeline can be
//! checkpointed and resumed.
//!
//! ```text
//! cargo run --release --features hdf5 --example hdf5_pipeline [FILE.h5 ...]
//! ```
//!
//! Without arguments it reads the two small files h5py wrote for the tests
//! (`tests/data/hdf5/scenes-*.h5`, `scripts/hdf5_conformance.py`).
//!
//! Then it runs the generator's way for comparison: the same rows read one at a time by one
//! thread (`Dataset::try_from_generator` over `hdf5-reader`, as the h5py generator reads
//! `X[i]`), centred and batched the same, and prints both rates. On D7's eight files
//! (`scripts/make_d7.py`, 1 GB of points) the figures are in BENCHMARKS.md ("HDF5: the
//! generator recipe").

use std::time::Instant;

use futures::StreamExt;
use hdf5_reader::{Hdf5File, SliceInfo, SliceInfoElem};
use ndarray::{Array2, Axis};
use streamload::format::hdf5::{ArrayD, Hdf5Dataset};
use streamload::{AUTOTUNE, Dataset};

/// The preprocessing of the generator: each point cloud centred on its mean.
fn center(points: ArrayD<f32>) -> anyhow::Result<Array2<f32>> {
    let points = points.into_dimensionality::<ndarray::Ix2>()?;
    let mean = points
        .mean_axis(Axis(0))
        .ok_or_else(|| anyhow::anyhow!("an empty point cloud"))?;
    Ok(&points - &mean)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/hdf5");
        files = vec![format!("{data}/scenes-0.h5"), format!("{data}/scenes-1.h5")];
    }

    let rows = Hdf5Dataset::new(files.clone(), "/scenes/points")
        .with_labels("/scenes/labels")
        .num_parallel_reads(AUTOTUNE)
        .build_labeled::<f32, i64>()
        .try_map_parallel(AUTOTUNE, |(points, label)| {
            let label = label.first().copied().unwrap_or_default();
            Ok((center(points)?, label))
        });
    let start = Instant::now();
    let mut epoch = batched(rows).iter();
    let (mut rows, mut count) = (0, 0);
    while let Some(batch) = epoch.next().await {
        let (points, labels) = batch?;
        if count == 0 {
            println!(
                "first batch: points {:?}, labels {:?}...",
                points.shape(),
                &labels[..4.min(labels.len())]
            );
        }
        rows += labels.len();
        count += 1;
    }
    let native = start.elapsed().as_secs_f64();
    println!("{count} batches, {rows} rows");
    println!("{}", epoch.stats());

    // The generator's way: one thread reads every row, one at a time.
    let start = Instant::now();
    let mut generated = 0;
    let mut epoch = batched(Dataset::try_from_generator(64, move || {
        generator(files.clone())
    }))
    .iter();
    while let Some(batch) = epoch.next().await {
        generated += batch?.1.len();
    }
    let one_thread = start.elapsed().as_secs_f64();
    assert_eq!(generated, rows, "the generator read other rows");
    println!(
        "native: {:.0} rows/s; from_generator, one row at a time: {:.0} rows/s ({:.2}x)",
        rows as f64 / native,
        rows as f64 / one_thread,
        one_thread / native
    );
    Ok(())
}

/// Shuffles, batches and stacks `(points, label)` rows: (32, n, 3) points and 32 labels.
fn batched(rows: Dataset<(Array2<f32>, i64)>) -> Dataset<(ndarray::Array3<f32>, Vec<i64>)> {
    rows.shuffle(256, Some(0))
        .batch(32)
        .try_map(|batch| {
            let views: Vec<_> = batch.iter().map(|(p, _)| p.view()).collect();
            let points = ndarray::stack(Axis(0), &views)?;
            let labels: Vec<i64> = batch.iter().map(|(_, l)| *l).collect();
            Ok((points, labels))
        })
        .prefetch(2)
}

/// The user's generator: every file opened in turn, every row of points and its label read
/// by itself (`X[i]`, `y[i]`), centred.
fn generator(files: Vec<String>) -> impl Iterator<Item = anyhow::Result<(Array2<f32>, i64)>> {
    files.into_iter().flat_map(|path| {
        let opened = Hdf5File::open(&path).and_then(|file| {
            Ok((
                file.dataset("/scenes/points")?,
                file.dataset("/scenes/labels")?,
            ))
        });
        let (points, labels) = match opened {
            Ok(opened) => opened,
            Err(e) => {
                let e = anyhow::anyhow!("{path}: {e}");
                return Box::new(std::iter::once(Err(e))) as Box<dyn Iterator<Item = _> + Send>;
            }
        };
        let n = labels.shape().first().copied().unwrap_or(0);
        let ndim = points.ndim();
        Box::new((0..n).map(move |i| {
            let mut row = SliceInfo::all(ndim);
            row.selections[0] = SliceInfoElem::Slice {
                start: i,
                end: i + 1,
                step: 1,
            };
            let label = SliceInfo {
                selections: vec![SliceInfoElem::Index(i)],
            };
            let x = points.read_slice::<f32>(&row)?;
            let y = labels.read_slice::<i64>(&label)?;
            let x = x.index_axis_move(Axis(0), 0);
            Ok((center(x)?, y.first().copied().unwrap_or_default()))
        }))
    })
}
