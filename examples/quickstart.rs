//! The main job: make a small dataset on local disk, run a real input pipeline over it, and
//! print the throughput and the per-stage report.
//!
//! ```text
//! cargo run --release --example quickstart
//! ```
//!
//! The data: 8 TFRecord shards of 25,000 `tf.train.Example`s (`label`, 16 `features`, a
//! small `image`), the format TensorFlow writes, under the system's temporary directory. The
//! pipeline reads 4 shards at once (CRC-checked), shuffles, parses the Examples on every core,
//! batches and prefetches: extract, transform, load.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use futures::StreamExt;
use streamload::format::{Compression, Example, TFRecordDataset, TFRecordWriter};
use streamload::{AUTOTUNE, Options};

const SHARDS: usize = 8;
const RECORDS_PER_SHARD: usize = 25_000;
const FEATURES: usize = 16;

/// A parsed training example.
#[derive(Debug)]
struct Record {
    label: i64,
    features: Vec<f32>,
    image: bytes::Bytes,
}

async fn make_data(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    tokio::fs::create_dir_all(dir)
        .await
        .with_context(|| format!("creating {}", dir.display()))?;
    let mut paths = Vec::new();
    for shard in 0..SHARDS {
        let path = dir.join(format!("train-{shard:05}-of-{SHARDS:05}.tfrecord"));
        let file = tokio::fs::File::create(&path)
            .await
            .with_context(|| format!("creating {}", path.display()))?;
        let mut writer = TFRecordWriter::new(tokio::io::BufWriter::new(file), Compression::None);
        for i in 0..RECORDS_PER_SHARD {
            let id = shard * RECORDS_PER_SHARD + i;
            let features = (0..FEATURES).map(|f| ((id * 31 + f * 7) % 1000) as f32 / 1000.0);
            let image: Vec<u8> = (0..64 + id % 192).map(|b| (b * 7 + id) as u8).collect();
            let example = Example::new()
                .with_int64("label", [(id % 10) as i64])
                .with_floats("features", features)
                .with_bytes("image", [image]);
            writer.write(&example.encode_to_bytes()).await?;
        }
        use tokio::io::AsyncWriteExt;
        writer.finish().await?.flush().await?;
        paths.push(path);
    }
    Ok(paths)
}

fn parse(record: bytes::Bytes) -> anyhow::Result<Record> {
    let example = Example::decode_record(record)?;
    let label = example.scalar::<i64>("label")?;
    let features = example
        .floats("features")
        .context("no float feature 'features'")?
        .to_vec();
    let image = example.scalar::<bytes::Bytes>("image")?;
    Ok(Record {
        label,
        features,
        image,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join("streamload-quickstart");
    let start = Instant::now();
    let files = make_data(&dir).await?;
    println!(
        "wrote {} TFRecord shards x {RECORDS_PER_SHARD} Examples to {} in {:.1} s",
        files.len(),
        dir.display(),
        start.elapsed().as_secs_f64()
    );

    let pipeline = TFRecordDataset::new(files)
        .num_parallel_reads(4) // extract: 4 shards at once, every CRC checked
        .build()
        .shuffle(10_000, Some(7)) // transform: shuffle ...
        .try_map_parallel(AUTOTUNE, parse) // ... and parse the Examples on every core
        .batch(256)
        .prefetch(2) // load: overlap with the consumer
        .with_options(Options::new().stats_timing(true)); // time the stages for the report

    for epoch_no in 1..=2 {
        let start = Instant::now();
        let mut epoch = pipeline.iter();
        let (mut records, mut label_sum, mut feature_sum, mut image_bytes) =
            (0u64, 0i64, 0f64, 0usize);
        while let Some(batch) = epoch.next().await {
            for record in batch? {
                records += 1;
                label_sum += record.label;
                feature_sum += record.features.iter().map(|&f| f64::from(f)).sum::<f64>();
                image_bytes += record.image.len();
            }
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "\nepoch {epoch_no}: {records} records in {secs:.3} s = {:.0} records/s \
             (label sum {label_sum}, feature sum {feature_sum:.1}, {image_bytes} image bytes)",
            records as f64 / secs
        );
        print!("{}", epoch.stats());
    }
    Ok(())
}
