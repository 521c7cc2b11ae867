//! A training loop that is preempted and resumed: it consumes some batches, saves the input
//! pipeline's position next to the (pretend) model checkpoint and exits; run again, it goes on
//! from the next batch, and checks that the batches it saw across both runs are exactly those
//! of an uninterrupted epoch.
//!
//! ```text
//! cargo run --release --example resume -- --steps 100   # trains 100 steps, saves, exits
//! cargo run --release --example resume                  # resumes and finishes the epoch
//! ```
//!
//! The data: 16 TFRecord shards of 8,192 `tf.train.Example`s under the system's temporary
//! directory (written once). The pipeline is W3's (WORKLOADS.md): 4 shards read at once,
//! shuffle(10,000), parse on every core, batch(256), prefetch. The state is saved by
//! position (a few bytes per element in the shuffle buffer), never as element contents.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use futures::StreamExt;
use streamload::format::{Compression, Example, TFRecordDataset, TFRecordWriter};
use streamload::{AUTOTUNE, Checkpoint, Dataset};

const SHARDS: usize = 16;
const RECORDS_PER_SHARD: usize = 8_192;

async fn make_data(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    tokio::fs::create_dir_all(dir)
        .await
        .with_context(|| format!("creating {}", dir.display()))?;
    let mut paths = Vec::new();
    for shard in 0..SHARDS {
        let path = dir.join(format!("train-{shard:05}-of-{SHARDS:05}.tfrecord"));
        paths.push(path.clone());
        if tokio::fs::try_exists(&path).await? {
            continue;
        }
        let part = path.with_extension("partial");
        let file = tokio::fs::File::create(&part).await?;
        let mut writer = TFRecordWriter::new(tokio::io::BufWriter::new(file), Compression::None);
        for i in 0..RECORDS_PER_SHARD {
            let id = (shard * RECORDS_PER_SHARD + i) as i64;
            let example = Example::new()
                .with_int64("id", [id])
                .with_floats("weights", (0..16).map(|w| (id as f32 + w as f32) / 1e5));
            writer.write(&example.encode_to_bytes()).await?;
        }
        use tokio::io::AsyncWriteExt;
        writer.finish().await?.flush().await?;
        tokio::fs::rename(&part, &path).await?;
    }
    Ok(paths)
}

/// W3's pipeline; each batch becomes the ids of its examples.
fn pipeline(files: Vec<PathBuf>) -> Dataset<Vec<i64>> {
    TFRecordDataset::new(files)
        .num_parallel_reads(4)
        .build()
        .shuffle(10_000, Some(42))
        .try_map_parallel(AUTOTUNE, |record| {
            Example::decode_record(record)?.scalar::<i64>("id")
        })
        .batch(256)
        .prefetch(2)
}

/// An order-dependent fingerprint of a batch (what a training step would consume).
fn fingerprint(batch: &[i64]) -> u64 {
    batch.iter().fold(0xCBF2_9CE4_8422_2325, |h, &id| {
        (h ^ id as u64).wrapping_mul(0x100_0000_01B3)
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut steps: Option<usize> = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--steps" => steps = Some(args.next().context("--steps N")?.parse()?),
            other => anyhow::bail!("unknown argument {other} (usage: resume [--steps N])"),
        }
    }
    let dir = std::env::temp_dir().join("streamload-resume");
    let files = make_data(&dir).await?;
    let state_file = dir.join("input.state");
    let seen_file = dir.join("seen.txt");
    let ds = pipeline(files.clone());

    // Resume when a state was saved, else start the epoch.
    let (mut epoch, mut seen) =
        if let (Some(_), Ok(bytes)) = (steps.is_none().then_some(()), std::fs::read(&state_file)) {
            let start = Instant::now();
            let checkpoint = Checkpoint::from_bytes(&bytes)?;
            let mut epoch = ds.iter_from(&checkpoint)?;
            let first = epoch.next().await.context("the epoch had ended")??;
            println!(
                "resumed from {} ({} bytes) in {:.0} ms to the first batch",
                state_file.display(),
                bytes.len(),
                start.elapsed().as_secs_f64() * 1e3
            );
            let mut seen: Vec<u64> = std::fs::read_to_string(&seen_file)?
                .lines()
                .map(str::parse)
                .collect::<Result<_, _>>()?;
            seen.push(fingerprint(&first));
            (epoch, seen)
        } else {
            (ds.iter(), Vec::new())
        };

    while let Some(batch) = epoch.next().await {
        seen.push(fingerprint(&batch?)); // the training step
        if steps.is_some_and(|n| seen.len() == n) {
            // Preempted: save the input position with the model's checkpoint, and exit.
            let start = Instant::now();
            let bytes = epoch.checkpoint()?.to_bytes();
            let took = start.elapsed();
            std::fs::write(&state_file, &bytes)?;
            let lines: Vec<String> = seen.iter().map(u64::to_string).collect();
            std::fs::write(&seen_file, lines.join("\n"))?;
            println!(
                "stopped after {} batches; saved the input position: {} bytes in {:.2} ms",
                seen.len(),
                bytes.len(),
                took.as_secs_f64() * 1e3
            );
            println!("run again without --steps to resume");
            return Ok(());
        }
    }

    // Check against an uninterrupted epoch of the same recipe (epoch 0).
    let full: Vec<u64> = pipeline(files)
        .collect()
        .await?
        .iter()
        .map(|b| fingerprint(b))
        .collect();
    anyhow::ensure!(
        seen == full,
        "the resumed epoch differs from the uninterrupted one ({} batches against {})",
        seen.len(),
        full.len()
    );
    println!(
        "{} batches across the interruption, exactly the uninterrupted epoch's",
        seen.len()
    );
    let _ = std::fs::remove_file(&state_file);
    Ok(())
}
