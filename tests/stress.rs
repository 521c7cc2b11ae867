//! Failure under stress: many pipelines at once in one runtime, and (below) random pipelines
//! of every spawning stage with concurrent epochs, random drops, injected errors and a faulty
//! store; afterwards threads, file descriptors, tasks and memory are back at their baseline,
//! every error was delivered and no element was delivered twice.

use std::time::Duration;

use streamload::format::{Compression, TFRecordDataset, TFRecordWriter};

/// How long a test waits for something that must happen before it calls it a hang (the
/// checks do not depend on it: it only turns a hang into a failure).
const HANG: Duration = Duration::from_secs(60);

/// `n` TFRecord records of 1 KiB in a file under `dir`.
async fn shard(dir: &std::path::Path, name: &str, n: usize) -> anyhow::Result<String> {
    let path = dir.join(name);
    let mut writer = TFRecordWriter::new(tokio::fs::File::create(&path).await?, Compression::None);
    for r in 0..n {
        let mut record = format!("{name}/{r}").into_bytes();
        record.resize(1024, b'.');
        writer.write(&record).await?;
    }
    writer.finish().await?;
    Ok(path.display().to_string())
}

/// Eight epochs of `TFRecordDataset -> map_parallel(64)` at once, in one runtime: the map's
/// workers once held a tokio blocking thread each for the whole epoch, so with 8 x 64
/// workers and `max_blocking_threads(512)` one epoch stalled while the others finished (the
/// readers' blocking reads found no thread). Here the pool holds 64 threads, so that the
/// stall is certain rather than likely (the first epoch's workers alone take the pool, and
/// its file is many reads). Workers run on threads of streamload's own now; every epoch ends,
/// whole.
#[test]
fn concurrent_map_parallel_pipelines_never_starve_the_readers() -> anyhow::Result<()> {
    const EPOCHS: usize = 8;
    const RECORDS: usize = 2000;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(64)
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(async {
        let dir = tempfile::tempdir()?;
        let mut epochs = Vec::new();
        for e in 0..EPOCHS {
            let file = shard(dir.path(), &format!("shard-{e}.tfrecord"), RECORDS).await?;
            // Small blocks: the file is many reads, most after the map's workers started.
            let dataset = TFRecordDataset::new([file])
                .buffer_size(16 * 1024)
                .build()
                .map_parallel(64, |record| record.len());
            epochs.push(tokio::spawn(async move { dataset.collect().await }));
        }
        for (e, epoch) in epochs.into_iter().enumerate() {
            let lengths = tokio::time::timeout(HANG, epoch)
                .await
                .map_err(|_| anyhow::anyhow!("epoch {e}: no end in {HANG:?}: starved"))???;
            anyhow::ensure!(lengths.len() == RECORDS, "epoch {e}: {}", lengths.len());
            anyhow::ensure!(lengths.iter().all(|&n| n == 1024), "epoch {e}: lengths");
        }
        anyhow::Ok(())
    });
    // A starved epoch's blocking jobs never run: do not wait for them.
    runtime.shutdown_timeout(Duration::from_secs(1));
    outcome
}
