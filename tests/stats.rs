//! Per-stage statistics as a user meets them: one row per stage as the pipeline was written,
//! however many files its interleaves open and however many epochs `repeat` runs; the two
//! spellings of one file pipeline report alike.

use std::sync::Arc;

use futures::StreamExt;
use streamload::format::{Compression, TFRecordDataset, TFRecordWriter};
use streamload::storage::{self, ReadOptions};
use streamload::{AUTOTUNE, Dataset, Epoch, Options};

#[path = "support/s3.rs"]
mod s3;

/// `n` tiny TFRecord files (`records` records each) in a temporary directory.
async fn shards(n: usize, records: usize) -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    for i in 0..n {
        let file =
            tokio::fs::File::create(dir.path().join(format!("shard-{i:04}.tfrecord"))).await?;
        let mut writer = TFRecordWriter::new(file, Compression::None);
        for r in 0..records {
            writer.write(format!("{i}/{r}").as_bytes()).await?;
        }
        writer.finish().await?;
    }
    Ok(dir)
}

fn pattern(dir: &tempfile::TempDir) -> String {
    format!("{}/*.tfrecord", dir.path().display())
}

async fn drain<T>(epoch: &mut Epoch<T>) -> anyhow::Result<u64> {
    let mut n = 0;
    while let Some(item) = epoch.next().await {
        item?;
        n += 1;
    }
    Ok(n)
}

/// The pattern `list_files`'s docs show: each file read by a dataset of its own.
fn per_file(dir: &tempfile::TempDir, epochs: u64) -> Dataset<bytes::Bytes> {
    Dataset::list_files(&pattern(dir), None)
        .parallel_interleave(4, 1, AUTOTUNE, |f| TFRecordDataset::new([f]).build())
        .repeat_n(epochs)
}

/// Rows of the snapshot and of the report's table after a whole run (the lines before the
/// `buffers:` summary; the verdict after it is prose whose length depends on the figures).
async fn rows(ds: &Dataset<bytes::Bytes>, expect: u64) -> anyhow::Result<(usize, usize, String)> {
    let mut epoch = ds.iter();
    assert_eq!(drain(&mut epoch).await?, expect);
    let stats = epoch.stats();
    let report = stats.to_string();
    let table = report
        .lines()
        .take_while(|line| !line.starts_with("buffers:"))
        .count();
    Ok((stats.snapshot().len(), table, report))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_do_not_grow_with_files_or_epochs() -> anyhow::Result<()> {
    let dir = shards(50, 2).await?;
    let (one, one_lines, one_report) = rows(&per_file(&dir, 1), 100).await?;
    let (many, many_lines, many_report) = rows(&per_file(&dir, 20), 2_000).await?;
    assert_eq!(one, many, "{one_report}\n{many_report}");
    assert_eq!(one_lines, many_lines, "{one_report}\n{many_report}");
    // One file or fifty: the same rows.
    let single = shards(1, 2).await?;
    let (few, _, few_report) = rows(&per_file(&single, 1), 2).await?;
    assert_eq!(few, one, "{few_report}\n{one_report}");
    Ok(())
}

/// Runs `ds` (timed) to its end with `consume` called on every element, three times, and
/// returns each run's verdict (the report's last line) with its report.
async fn verdicts<T: Send + 'static>(
    ds: &Dataset<T>,
    consume: impl Fn(),
) -> anyhow::Result<Vec<(String, String)>> {
    let ds = ds.with_options(Options::new().stats_timing(true));
    let mut out = Vec::new();
    for _ in 0..3 {
        let mut epoch = ds.iter();
        while let Some(item) = epoch.next().await {
            item?;
            consume();
        }
        let report = epoch.stats().to_string();
        let verdict = report
            .lines()
            .find_map(|l| l.strip_prefix("bottleneck: "))
            .unwrap_or_default()
            .to_string();
        out.push((verdict, report));
    }
    Ok(out)
}

fn sleep_ms(ms: u64) {
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

/// Asserts every verdict starts with `stage` and says `advice`.
fn assert_named(runs: &[(String, String)], stage: &str, advice: &str) {
    for (verdict, report) in runs {
        assert!(
            verdict.starts_with(stage) && verdict.contains(advice),
            "expected {stage:?} ... {advice:?}, got:\n{report}"
        );
    }
}

fn slow_generator() -> Dataset<u64> {
    Dataset::from_generator(4, || (0..40u64).inspect(|_| sleep_ms(3)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_generator_is_named_with_or_without_prefetch() -> anyhow::Result<()> {
    let advice = "move its work into map_parallel";
    let runs = verdicts(&slow_generator().map(|x| x + 1), || {}).await?;
    assert_named(&runs, "from_generator is busy", advice);
    let runs = verdicts(&slow_generator().map(|x| x + 1).prefetch(2), || {}).await?;
    assert_named(&runs, "from_generator is busy", advice);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_generator_inside_an_interleave_is_not_called_storage() -> anyhow::Result<()> {
    let ds = Dataset::range(0, 2).interleave(2, 1, |_| slow_generator());
    let runs = verdicts(&ds, || {}).await?;
    assert_named(
        &runs,
        "from_generator (inside interleave) is busy",
        "move its work into map_parallel",
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_inline_map_is_named_without_prefetch() -> anyhow::Result<()> {
    // The consumer never waits on a pending stream: it runs the map inside `next()`.
    let ds = Dataset::range(0, 50)
        .map(|x| {
            sleep_ms(3);
            x
        })
        .named("slow");
    let runs = verdicts(&ds, || {}).await?;
    assert_named(
        &runs,
        "map (slow) is busy",
        "move its work into map_parallel",
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_map_parallel_is_named() -> anyhow::Result<()> {
    let ds = Dataset::range(0, 100).try_map_parallel(2, |x| {
        sleep_ms(3);
        Ok(x)
    });
    let runs = verdicts(&ds, || {}).await?;
    assert_named(&runs, "map_parallel is busy", "2/2 workers");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_consumer_is_named_with_or_without_prefetch() -> anyhow::Result<()> {
    let ds = Dataset::range(0, 60).map(|x| x * 2);
    for ds in [ds.clone(), ds.prefetch(2)] {
        let runs = verdicts(&ds, || sleep_ms(3)).await?;
        assert_named(&runs, "the consumer", "the input pipeline keeps up");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_storage_is_named() -> anyhow::Result<()> {
    // Small shards on an S3 server behind a proxy that holds each response's first byte for
    // 20 ms: reading is waiting.
    let dir = tempfile::tempdir()?;
    let local = shards(4, 20).await?;
    std::fs::create_dir_all(dir.path().join("slow"))?;
    for entry in std::fs::read_dir(local.path())? {
        let entry = entry?;
        std::fs::copy(
            entry.path(),
            dir.path().join("slow").join(entry.file_name()),
        )?;
    }
    let server = s3::s3_server(dir.path(), "AKIDTEST", "s3cr3t-test-key").await;
    let faults = Arc::new(s3::Faults {
        first_byte_delay: std::time::Duration::from_millis(20),
        ..Default::default()
    });
    let proxy = s3::fault_proxy(server, Arc::clone(&faults)).await;
    let store = s3::s3_store_retrying(proxy, "slow", "AKIDTEST", "s3cr3t-test-key", 0);
    storage::register_with("s3://slow", store, ReadOptions::default())?;
    let files: Vec<String> = (0..4)
        .map(|i| format!("s3://slow/shard-{i:04}.tfrecord"))
        .collect();
    let ds = TFRecordDataset::new(files).build();
    let runs = verdicts(&ds, || {}).await?;
    assert_named(&runs, "tfrecord waits", "on storage");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_two_spellings_of_a_file_pipeline_report_alike() -> anyhow::Result<()> {
    let dir = shards(12, 5).await?;
    let mut files: Vec<_> = std::fs::read_dir(dir.path())?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.sort();
    let per_file =
        Dataset::list_files(&pattern(&dir), None)
            .parallel_interleave(4, 1, AUTOTUNE, |f| TFRecordDataset::new([f]).build());
    let built_in = TFRecordDataset::new(files).num_parallel_reads(4).build();
    for (ds, expect) in [
        (
            per_file,
            ["list_files", "tfrecord", "parallel_interleave"].as_slice(),
        ),
        (built_in, ["tfrecord"].as_slice()),
    ] {
        let mut epoch = ds.iter();
        assert_eq!(drain(&mut epoch).await?, 60);
        let report = epoch.stats().to_string();
        // No plumbing the user did not write: one reader row, with all the records.
        let stages = epoch.stats().snapshot();
        let mut names: Vec<&str> = stages.iter().map(|s| s.name).collect();
        names.sort_unstable();
        let mut want = expect.to_vec();
        want.sort_unstable();
        assert_eq!(names, want, "{report}");
        let reader = stages
            .iter()
            .find(|s| s.name == "tfrecord")
            .expect("a reader row");
        assert_eq!(reader.elements, 60, "{report}");
        // The readers as the user asked for them: 4 (AUTOTUNE opens 4 more ahead).
        let readers = stages
            .iter()
            .find(|s| s.name == "parallel_interleave")
            .unwrap_or(reader);
        assert_eq!(readers.parallelism, 4, "{report}");
        // Upstream first: the reader's line before its consumer's.
        let line = |name: &str| {
            report
                .lines()
                .position(|l| l.trim_start().starts_with(name))
        };
        if expect.len() > 1 {
            assert!(
                line("inner tfrecord") < line("parallel_interleave"),
                "{report}"
            );
        }
    }
    Ok(())
}
