//! The main job: make a small dataset on local disk, run a real input pipeline over it, and
//! print the throughput and the per-stage report.
//!
//! ```text
//! cargo run --release --example quickstart
//! ```
//!
//! The data: 8 text shards of 25,000 records (`id,label,f0 f1 ... f15`) under the system's
//! temporary directory. The pipeline reads the shards 4 at a time (each shard a blocking line
//! reader on a thread of its own), shuffles, parses records on every core, batches and
//! prefetches: extract, transform, load.

use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use futures::StreamExt;
use streamload::{AUTOTUNE, Dataset, Options};

const SHARDS: usize = 8;
const RECORDS_PER_SHARD: usize = 25_000;
const FEATURES: usize = 16;

/// A parsed training example.
#[derive(Debug)]
struct Record {
    label: i64,
    features: Vec<f32>,
}

fn make_data(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut paths = Vec::new();
    for shard in 0..SHARDS {
        let path = dir.join(format!("train-{shard:05}-of-{SHARDS:05}.csv"));
        let file =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        let mut out = BufWriter::new(file);
        for i in 0..RECORDS_PER_SHARD {
            let id = shard * RECORDS_PER_SHARD + i;
            write!(out, "{id},{}", id % 10)?;
            for f in 0..FEATURES {
                write!(
                    out,
                    "{}{:.4}",
                    if f == 0 { ',' } else { ' ' },
                    ((id * 31 + f * 7) % 1000) as f32 / 1000.0
                )?;
            }
            writeln!(out)?;
        }
        out.flush()?;
        paths.push(path);
    }
    Ok(paths)
}

/// One shard's lines, read by a blocking reader on a thread of its own.
fn lines(path: PathBuf) -> Dataset<(PathBuf, u64, String)> {
    Dataset::try_from_generator(
        256,
        move || -> Box<dyn Iterator<Item = anyhow::Result<_>>> {
            let path = path.clone();
            match std::fs::File::open(&path) {
                Ok(file) => Box::new(std::io::BufReader::new(file).lines().enumerate().map(
                    move |(n, line)| {
                        let line = line.with_context(|| {
                            format!("reading line {} of {}", n + 1, path.display())
                        })?;
                        Ok((path.clone(), n as u64 + 1, line))
                    },
                )),
                Err(e) => Box::new(std::iter::once(Err(
                    anyhow::Error::new(e).context(format!("opening {}", path.display()))
                ))),
            }
        },
    )
}

fn parse((path, line_no, line): (PathBuf, u64, String)) -> anyhow::Result<Record> {
    let context = || format!("parsing record at line {line_no} of {}", path.display());
    let mut fields = line.split(',');
    let _id = fields.next().with_context(context)?;
    let label = fields
        .next()
        .with_context(context)?
        .parse()
        .with_context(context)?;
    let features = fields
        .next()
        .with_context(context)?
        .split(' ')
        .map(|v| v.parse::<f32>())
        .collect::<Result<Vec<_>, _>>()
        .with_context(context)?;
    Ok(Record { label, features })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join("streamload-quickstart");
    let files = make_data(&dir)?;
    println!(
        "wrote {} shards x {RECORDS_PER_SHARD} records to {}",
        files.len(),
        dir.display()
    );

    let pipeline = Dataset::from_vec(files)
        .parallel_interleave(4, 16, AUTOTUNE, lines) // extract: 4 shards at once
        .shuffle(10_000, Some(7)) // transform: shuffle ...
        .map_parallel(AUTOTUNE, parse) // ... and parse on every core
        .batch(256)
        .prefetch(2) // load: overlap with the consumer
        .with_options(Options::new().stats_timing(true)); // time the stages for the report

    for epoch_no in 1..=2 {
        let start = Instant::now();
        let mut epoch = pipeline.iter();
        let (mut records, mut label_sum, mut feature_sum) = (0u64, 0i64, 0f64);
        while let Some(batch) = epoch.next().await {
            for record in batch? {
                records += 1;
                label_sum += record.label;
                feature_sum += record.features.iter().map(|&f| f64::from(f)).sum::<f64>();
            }
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "\nepoch {epoch_no}: {records} records in {secs:.3} s = {:.0} records/s (label sum {label_sum}, feature sum {feature_sum:.1})",
            records as f64 / secs
        );
        print!("{}", epoch.stats());
    }
    Ok(())
}
