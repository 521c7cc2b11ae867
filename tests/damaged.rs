//! Damaged data as a policy: TFRecord resynchronisation, error budgets (a count or a rate),
//! the quarantine log (JSON lines, callback, the stage's count), the same policy for every
//! reader and for user functions, and resumable under checkpoints.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use streamload::format::{
    Column, Compression, CsvDataset, TFRecordDataset, TFRecordWriter, TextLineDataset,
};
use streamload::{Checkpoint, Dataset, Error, ErrorBudget, Quarantine, Skipped};

const RECORDS: usize = 100;

fn payload(r: usize) -> Vec<u8> {
    format!("record-{r:03}").into_bytes()
}

/// `RECORDS` records (each 12 + 10 + 4 = 26 bytes), and the offset of each.
async fn shard() -> anyhow::Result<(Vec<u8>, Vec<usize>)> {
    let mut writer = TFRecordWriter::new(Vec::new(), Compression::None);
    let mut offsets = Vec::new();
    for r in 0..RECORDS {
        offsets.push(r * 26);
        writer.write(&payload(r)).await?;
    }
    Ok((writer.finish().await?, offsets))
}

/// The shard with three kinds of damage: a flipped bit in record 10's payload, a damaged
/// length of record 20, and 7 bytes of garbage inserted before record 30.
async fn damaged_shard() -> anyhow::Result<Vec<u8>> {
    let (mut bytes, offsets) = shard().await?;
    bytes[offsets[10] + 12 + 3] ^= 0x10;
    bytes[offsets[20] + 1] ^= 0xff;
    let at = offsets[30];
    bytes.splice(at..at, *b"garbage");
    Ok(bytes)
}

fn record_indices(records: &[bytes::Bytes]) -> Vec<usize> {
    records
        .iter()
        .map(|r| {
            std::str::from_utf8(&r[7..])
                .expect("utf-8")
                .parse()
                .expect("a number")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_costs_one_record_per_damage_and_says_what_it_skipped() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("damaged.tfrecord");
    std::fs::write(&path, damaged_shard().await?)?;

    // TensorFlow's behaviour stays the default: the file ends at the first damage.
    let plain: Vec<_> = TFRecordDataset::new([&path]).build().iter().collect().await;
    assert_eq!(plain.iter().filter(|r| r.is_ok()).count(), 10);
    assert!(plain.last().is_some_and(|r| r.is_err()));

    for buffer in [16, 64, 1 << 20] {
        let items: Vec<_> = TFRecordDataset::new([&path])
            .resync(true)
            .buffer_size(buffer)
            .build()
            .iter()
            .collect()
            .await;
        let (mut ok, mut errors) = (Vec::new(), Vec::new());
        for item in items {
            match item {
                Ok(r) => ok.push(r),
                Err(e) => errors.push(e),
            }
        }
        let expected: Vec<usize> = (0..RECORDS).filter(|r| ![10, 20].contains(r)).collect();
        assert_eq!(record_indices(&ok), expected, "buffer {buffer}");
        assert_eq!(errors.len(), 3, "buffer {buffer}: {errors:?}");
        let skipped: Vec<_> = errors
            .iter()
            .map(|e| match e.downcast_ref::<Error>() {
                Some(Error::DataLoss {
                    skipped: Some(r), ..
                }) => r.clone(),
                other => panic!("not a resynchronised DataLoss: {other:?}"),
            })
            .collect();
        assert_eq!(skipped[0], 260..286, "record 10 whole");
        assert_eq!(skipped[1], 520..546, "record 20 whole");
        assert_eq!(skipped[2], 780..787, "the garbage");
        assert!(
            format!("{:#}", errors[2]).contains("skipped 7 bytes (780..787), reading on at 787"),
            "{:#}",
            errors[2]
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damage_at_the_end_skips_to_the_end() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("cut.tfrecord");
    let (bytes, _) = shard().await?;
    std::fs::write(&path, &bytes[..bytes.len() - 5])?;
    let items: Vec<_> = TFRecordDataset::new([&path])
        .resync(true)
        .build()
        .iter()
        .collect()
        .await;
    assert_eq!(items.len(), RECORDS, "99 records and the truncation");
    let err = items
        .last()
        .expect("items")
        .as_ref()
        .expect_err("truncated");
    assert!(format!("{err:#}").contains("truncated record"), "{err:#}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_skips_within_and_fails_past_it_with_a_summary() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("damaged.tfrecord");
    std::fs::write(&path, damaged_shard().await?)?;
    let log = dir.path().join("quarantine.jsonl");
    let reported = Arc::new(Mutex::new(Vec::<Skipped>::new()));
    let sink = Arc::clone(&reported);
    let records = || TFRecordDataset::new([&path]).resync(true).build();

    // Within: every good record, each skipped one in the log, the callback and the stats.
    let within = records()
        .ignore_errors_within(ErrorBudget::count(3).quarantine(Quarantine::json_lines(&log)?));
    let mut epoch = within.iter();
    let mut ok = Vec::new();
    while let Some(item) = epoch.next().await {
        ok.push(item?);
    }
    assert_eq!(ok.len(), RECORDS - 2);
    let skipped: u64 = epoch.stats().snapshot().iter().map(|s| s.skipped).sum();
    assert_eq!(skipped, 3, "the stage's count");
    let report = epoch.stats().to_string();
    assert!(report.contains("0 (3 skipped)"), "{report}");
    let lines = std::fs::read_to_string(&log)?;
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(
        lines[0].contains(r#""record":10,"offset":272,"skipped_bytes":26"#),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("damaged.tfrecord"), "{}", lines[0]);

    let by_callback = records().ignore_errors_within(ErrorBudget::rate(0.1).quarantine(
        Quarantine::callback(move |s| sink.lock().expect("lock").push(s.clone())),
    ));
    assert_eq!(by_callback.collect().await?.len(), RECORDS - 2);
    let reported = reported.lock().expect("lock").clone();
    assert_eq!(
        reported.iter().map(|s| s.index).collect::<Vec<_>>(),
        [10, 20, 30],
        "indices among the stage's inputs"
    );
    assert_eq!(reported[1].record, Some(20));

    // Past it: the third error fails the epoch, naming the budget and what was skipped.
    let err = records()
        .ignore_errors_within(ErrorBudget::count(2))
        .collect()
        .await
        .expect_err("past the budget");
    let shown = format!("{err:#}");
    assert!(
        shown.contains("error budget exhausted (at most 2 errors): 2 errors in 31 elements"),
        "{shown}"
    );
    assert!(shown.contains("damaged.tfrecord (2)"), "{shown}");
    assert!(matches!(
        err.downcast_ref::<Error>(),
        Some(Error::DataLoss { .. })
    ));
    // A rate: 3 errors in the first 31 elements are more than 5%.
    let err = records()
        .ignore_errors_within(ErrorBudget::rate(0.05))
        .collect()
        .await
        .expect_err("past the rate");
    assert!(
        format!("{err:#}").contains("at most 5% of the elements"),
        "{err:#}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reader_and_user_functions_share_the_policy() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // Text and CSV: a damaged compressed file is data loss; the next file is read.
    let bad_gz = dir.path().join("bad.txt.gz");
    std::fs::write(&bad_gz, b"\x1f\x8b\x08\x00garbage")?;
    let good = dir.path().join("good.txt");
    std::fs::write(&good, "1\n2\n")?;
    let lines = TextLineDataset::new([&bad_gz, &good])
        .compression(Compression::Auto)
        .build()
        .ignore_errors_within(ErrorBudget::count(1))
        .collect()
        .await?;
    assert_eq!(lines, ["1", "2"]);
    let rows = CsvDataset::new([&bad_gz, &good], [Column::int64()])
        .compression(Compression::Auto)
        .build()
        .ignore_errors_within(ErrorBudget::count(1))
        .collect()
        .await?;
    assert_eq!(rows.len(), 2);

    // User functions: map and map_parallel.
    fn parse(s: &'static str) -> anyhow::Result<i64> {
        Ok(s.parse()?)
    }
    let words = ["1", "x", "3", "y", "5"];
    let mapped = Dataset::from_iter(words)
        .try_map(parse)
        .ignore_errors_within(ErrorBudget::count(2))
        .collect()
        .await?;
    assert_eq!(mapped, [1, 3, 5]);
    let mapped = Dataset::from_iter(words)
        .try_map_parallel(4, parse)
        .ignore_errors_within(ErrorBudget::count(2))
        .collect()
        .await?;
    assert_eq!(mapped, [1, 3, 5]);
    let err = Dataset::from_iter(words)
        .try_map_parallel(4, parse)
        .ignore_errors_within(ErrorBudget::count(1))
        .collect()
        .await
        .expect_err("two errors");
    assert!(format!("{err:#}").contains("invalid digit"), "{err:#}");
    Ok(())
}

/// An epoch interrupted at any element and resumed from its checkpoint yields what the
/// uninterrupted one does, and the budget goes on counting where it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_and_budgets_resume_from_checkpoints() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("damaged.tfrecord");
    std::fs::write(&path, damaged_shard().await?)?;
    let dataset = |n: u64| {
        TFRecordDataset::new([&path])
            .resync(true)
            .buffer_size(64)
            .build()
            .ignore_errors_within(ErrorBudget::count(n))
    };
    let whole = dataset(3).collect().await?;
    for stop in [0, 5, 10, 11, 29, 30, 50, 97] {
        let mut epoch = dataset(3).iter();
        let mut got = Vec::new();
        for _ in 0..stop {
            got.push(epoch.next().await.expect("an element")?);
        }
        let saved = epoch.checkpoint()?.to_bytes();
        drop(epoch);
        let mut rest = dataset(3).iter_from(&Checkpoint::from_bytes(&saved)?)?;
        while let Some(item) = rest.next().await {
            got.push(item?);
        }
        assert_eq!(got, whole, "interrupted after {stop}");
        // A budget of 2 resumed after the first two errors fails at the third.
        if stop >= 30 {
            let mut epoch = dataset(2).iter();
            for _ in 0..stop.min(28) {
                epoch.next().await.expect("an element")?;
            }
            let saved = epoch.checkpoint()?.to_bytes();
            let rest: Vec<_> = dataset(2)
                .iter_from(&Checkpoint::from_bytes(&saved)?)?
                .collect()
                .await;
            assert!(rest.last().is_some_and(|r| r.is_err()), "stop {stop}");
        }
    }
    Ok(())
}

/// A CSV row that does not parse is an error element of its own: the rows after it follow,
/// so a budget counts bad rows one by one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_csv_rows_are_skipped_one_by_one() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("rows.csv");
    std::fs::write(&path, "1\nx\n3\ny\n5\n")?;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let rows =
        CsvDataset::new([&path], [Column::int64()])
            .build()
            .ignore_errors_within(ErrorBudget::count(2).quarantine(Quarantine::callback(
                move |s| log.lock().expect("lock").push(s.index),
            )))
            .collect()
            .await?;
    let values: Vec<i64> = rows.iter().filter_map(|r| r[0].as_i64()).collect();
    assert_eq!(values, [1, 3, 5]);
    assert_eq!(*seen.lock().expect("lock"), [1, 3]);
    Ok(())
}
