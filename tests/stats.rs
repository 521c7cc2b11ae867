//! Per-stage statistics as a user meets them: one row per stage as the pipeline was written,
//! however many files its interleaves open and however many epochs `repeat` runs; the two
//! spellings of one file pipeline report alike.

use futures::StreamExt;
use streamload::format::{Compression, TFRecordDataset, TFRecordWriter};
use streamload::{AUTOTUNE, Dataset, Epoch, Options};

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
fn per_file(dir: &tempfile::TempDir, epochs: i64) -> Dataset<bytes::Bytes> {
    Dataset::list_files(&pattern(dir), None)
        .parallel_interleave(4, 1, AUTOTUNE, |f| TFRecordDataset::new([f]).build())
        .repeat(epochs)
}

/// Rows of the snapshot and lines of the report after a whole run.
async fn rows(ds: &Dataset<bytes::Bytes>, expect: u64) -> anyhow::Result<(usize, usize, String)> {
    let mut epoch = ds.iter();
    assert_eq!(drain(&mut epoch).await?, expect);
    let stats = epoch.stats();
    let report = stats.to_string();
    Ok((stats.snapshot().len(), report.lines().count(), report))
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
