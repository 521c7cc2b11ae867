//! Streams the TFRecord shards of a bucket with a progress bar, then prints the throughput
//! and the per-stage report.
//!
//! ```text
//! # Your bucket (credentials and endpoint from AWS_* environment variables):
//! cargo run --release --example s3_stream -- 's3://my-bucket/train/train-*.tfrecord'
//! # No argument: a local S3 server (s3s over objects in memory, SigV4 checked) with
//! # generated shards, behind a proxy adding 50 ms before each response, as real object
//! # storage does:
//! cargo run --release --example s3_stream
//! ```
//!
//! Shards are read `--cycle` at a time (default 16): with first-byte latency of tens of
//! milliseconds per request, reading many objects at once is what makes the stream fast.

#[path = "../tests/support/s3.rs"]
mod s3;

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use futures::StreamExt;
use streamload::Options;
use streamload::format::{Compression, TFRecordDataset, TFRecordWriter};
use streamload::storage::{self, Location};

#[derive(Parser, Debug)]
#[command(about = "Stream TFRecord shards from object storage")]
struct Args {
    /// A URL glob of TFRecord shards (s3://, gs://, az://, file://; not http(s)://: listing
    /// needs WebDAV, so an http(s) URL can only name an object); none: a local server.
    pattern: Option<String>,
    /// Shards read at once.
    #[arg(long, default_value_t = 16)]
    cycle: usize,
}

/// Puts `shards` shards of 4 MiB into a local S3 server behind a 50 ms proxy; returns the
/// glob pattern.
async fn local_bucket(shards: u32) -> anyhow::Result<String> {
    let objects = s3::MemoryS3::default();
    for s in 0..shards {
        let mut writer = TFRecordWriter::new(Vec::new(), Compression::None);
        for r in 0..1020u32 {
            let payload: Vec<u8> = (0..4096u32).map(|i| (i ^ r ^ s) as u8).collect();
            writer.write(&payload).await?;
        }
        let key = format!("train/train-{s:05}-of-{shards:05}.tfrecord");
        objects.insert("demo-bucket", &key, writer.finish().await?.into());
    }
    let server = s3::memory_s3_server(objects, "AKIDDEMO", "demo-secret-key").await;
    let faults = Arc::new(s3::Faults {
        first_byte_delay: Duration::from_millis(50),
        ..Default::default()
    });
    let proxy = s3::fault_proxy(server, faults).await;
    storage::register(
        "s3://demo-bucket",
        s3::s3_store(proxy, "demo-bucket", "AKIDDEMO", "demo-secret-key"),
    )?;
    eprintln!("local S3 server on {server}, behind a 50 ms proxy on {proxy}");
    Ok("s3://demo-bucket/train/train-*.tfrecord".to_string())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let pattern = match args.pattern {
        Some(pattern) => pattern,
        None => local_bucket(32).await?,
    };
    let files: Vec<Location> = storage::glob(&pattern).await?;
    println!("{} shards match {pattern}", files.len());

    let records = TFRecordDataset::new(files)
        .num_parallel_reads(args.cycle)
        .build()
        .with_options(Options::new().deterministic(false).stats_timing(true));
    let start = Instant::now();
    let mut epoch = records.iter_with_progress("records");
    let (mut count, mut bytes) = (0u64, 0u64);
    while let Some(record) = epoch.next().await {
        bytes += record?.len() as u64;
        count += 1;
    }
    epoch.bar().finish();
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{count} records, {:.1} MB in {secs:.2} s = {:.1} MB/s, {:.0} records/s (cycle {})",
        bytes as f64 / 1e6,
        bytes as f64 / 1e6 / secs,
        count as f64 / secs,
        args.cycle
    );
    print!("{}", epoch.epoch().stats());
    Ok(())
}
