//! The autotuner, checked by behaviour: autotuned prefetch buffers grow when the consumer
//! waits on a producer that keeps up, never past the memory budget; autotuned `map_parallel`
//! sets idle workers aside, keeps busy ones, and autotuned stages share the CPU budget; output
//! order does not depend on what the tuner chooses.
//!
//! Each test runs a pipeline for a fixed time (the tuner looks every 50 ms) and asserts the
//! direction of its choices, not speed.

use std::time::{Duration, Instant};

use futures::StreamExt;
use streamload::format::{Compression, TFRecordDataset, TFRecordWriter};
use streamload::{AUTOTUNE, Dataset, Epoch, Options, StageSnapshot};

/// Drains `epoch` for `run`, calling `consume` on every element.
/// The tuner decides from measured busy and wait times: tests in this binary run one at a
/// time, so one test's spinning workers do not change what another's tuner measures.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn drain_for<T>(epoch: &mut Epoch<T>, run: Duration, mut consume: impl FnMut(u64)) {
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < run {
        match epoch.next().await {
            Some(item) => {
                assert!(item.is_ok(), "unexpected error element");
                consume(n);
                n += 1;
            }
            None => break,
        }
    }
}

fn stage(epoch: &Epoch<impl Sized>, name: &str) -> StageSnapshot {
    let stages = epoch.stats().snapshot();
    stages
        .into_iter()
        .find(|s| s.name == name && !s.nested)
        .unwrap_or_else(|| panic!("no stage {name}"))
}

/// A consumer that works ~60 us per element (long enough for overlap to pay), with a slow
/// moment every 50 elements: the producer keeps up on average, and the buffer absorbs the
/// bursts.
fn bursty(n: u64) {
    spin(60);
    if n % 50 == 49 {
        std::thread::sleep(Duration::from_millis(3));
    }
}

/// An upstream whose elements cost ~100 us each, so running ahead pays (prefetch runs a
/// cheaper upstream in its consumer instead, with no buffer to tune).
fn costly<T: Send + 'static>(ds: Dataset<T>) -> Dataset<T> {
    ds.map(|x| {
        spin(100);
        x
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autotuned_prefetch_grows_while_the_consumer_waits_on_a_producer_that_keeps_up() {
    let _one = ONE_AT_A_TIME.lock().await;
    let ds = costly(Dataset::counter(0, 1).batch(16)).prefetch(AUTOTUNE);
    let mut epoch = ds.iter();
    drain_for(&mut epoch, Duration::from_millis(1500), bursty).await;
    let prefetch = stage(&epoch, "prefetch");
    assert!(prefetch.autotuned, "{prefetch:?}");
    assert!(
        prefetch.buffer_limit > 2,
        "the buffer never grew from 2: {prefetch:?}\n{}",
        epoch.stats()
    );
    assert!(prefetch.buffer_limit <= 1024, "{prefetch:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_prefetch_is_left_alone() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut epoch = costly(Dataset::counter(0, 1).batch(16)).prefetch(3).iter();
    drain_for(&mut epoch, Duration::from_millis(400), bursty).await;
    let prefetch = stage(&epoch, "prefetch");
    assert!(!prefetch.autotuned);
    assert_eq!(prefetch.buffer_limit, 3);
}

/// A TFRecord file of `records` records of `size` bytes, in a temporary directory.
async fn records_file(records: usize, size: usize) -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    let file = tokio::fs::File::create(dir.path().join("data.tfrecord")).await?;
    let mut writer = TFRecordWriter::new(file, Compression::None);
    let payload = vec![7u8; size];
    for _ in 0..records {
        writer.write(&payload).await?;
    }
    writer.finish().await?;
    Ok(dir)
}

/// Big records (64 KiB) read from a file, so the tuner knows their bytes, prefetched with
/// `AUTOTUNE` under `budget` bytes, consumed in bursts for a while.
async fn prefetch_of_big_records(budget: u64) -> anyhow::Result<(StageSnapshot, String, u64)> {
    let dir = records_file(64, 64 << 10).await?;
    let ds = costly(
        TFRecordDataset::new([dir.path().join("data.tfrecord")])
            .build()
            .repeat(),
    )
    .prefetch(AUTOTUNE)
    .with_options(Options::new().ram_budget(budget));
    let mut epoch = ds.iter();
    drain_for(&mut epoch, Duration::from_millis(1500), bursty).await;
    let report = epoch.stats().to_string();
    Ok((
        stage(&epoch, "prefetch"),
        report,
        epoch.stats().peak_buffered_bytes(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_budget_caps_autotuned_buffers() -> anyhow::Result<()> {
    let _one = ONE_AT_A_TIME.lock().await;
    // A budget of 3 records: the buffer may not grow past what fits (2 -> 4 would need 4).
    let budget = 3 * (64 << 10) + 1024;
    let (tight, report, peak) = prefetch_of_big_records(budget).await?;
    assert!(tight.buffer_limit <= 2, "{tight:?}\n{report}");
    assert!(peak > 0, "the reader's bytes were not counted:\n{report}");
    // The same pipeline with room grows (so the cap above is the budget's doing).
    let (roomy, report, _) = prefetch_of_big_records(1 << 30).await?;
    assert!(roomy.buffer_limit > 2, "{roomy:?}\n{report}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autotuned_map_parallel_sets_idle_workers_aside() {
    let _one = ONE_AT_A_TIME.lock().await;
    // A cheap function and a slow consumer: the workers are idle nearly all the time.
    let ds = Dataset::counter(0, 1)
        .map_parallel(AUTOTUNE, |x| x + 1)
        .with_options(Options::new().cpu_budget(4));
    let mut epoch = ds.iter();
    drain_for(&mut epoch, Duration::from_millis(1500), |_| {
        std::thread::sleep(Duration::from_millis(1))
    })
    .await;
    let map = stage(&epoch, "map_parallel");
    assert!(map.autotuned);
    assert_eq!(map.parallelism, 1, "{map:?}\n{}", epoch.stats());
}

fn spin(micros: u64) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_micros(micros) {
        std::hint::spin_loop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autotuned_map_parallel_keeps_busy_workers() {
    let _one = ONE_AT_A_TIME.lock().await;
    // CPU-bound calls and a consumer that takes everything at once: the map is the bottleneck.
    let ds = Dataset::counter(0, 1)
        .map_parallel(AUTOTUNE, |x| {
            spin(300);
            x
        })
        .with_options(Options::new().cpu_budget(2));
    let mut epoch = ds.iter();
    drain_for(&mut epoch, Duration::from_millis(800), |_| {}).await;
    let map = stage(&epoch, "map_parallel");
    assert_eq!(map.parallelism, 2, "{map:?}\n{}", epoch.stats());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autotuned_stages_share_the_cpu_budget() {
    let _one = ONE_AT_A_TIME.lock().await;
    // Two CPU-bound stages each start with the whole budget (2 + 2 workers, all busy): the
    // tuner takes workers from them until the cores they keep busy fit the budget.
    let ds = Dataset::counter(0, 1)
        .map_parallel(AUTOTUNE, |x| {
            spin(200);
            x
        })
        .map_parallel(AUTOTUNE, |x| {
            spin(200);
            x
        })
        .with_options(Options::new().cpu_budget(2));
    let mut epoch = ds.iter();
    drain_for(&mut epoch, Duration::from_millis(1000), |_| {}).await;
    let total: u64 = epoch
        .stats()
        .snapshot()
        .iter()
        .filter(|s| s.name == "map_parallel")
        .map(|s| s.parallelism)
        .sum();
    assert!(total <= 3, "{}", epoch.stats());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_order_does_not_depend_on_the_tuner() -> anyhow::Result<()> {
    let _one = ONE_AT_A_TIME.lock().await;
    // Calls of uneven cost, a consumer that pauses now and then: the tuner changes the
    // number of workers while the epoch runs; the output stays in input order.
    let n = 20_000;
    let ds = Dataset::range(0, n)
        .map_parallel(AUTOTUNE, |x| {
            if x % 7 == 0 {
                spin(50);
            }
            x * 3
        })
        .prefetch(AUTOTUNE)
        .with_options(Options::new().cpu_budget(4));
    let mut epoch = ds.iter();
    let mut got = Vec::new();
    while let Some(x) = epoch.next().await {
        got.push(x?);
        if got.len() % 2_000 == 0 {
            tokio::time::sleep(Duration::from_millis(60)).await;
        }
    }
    assert_eq!(got, (0..n).map(|x| x * 3).collect::<Vec<_>>());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_shows_what_the_tuner_chose() {
    let _one = ONE_AT_A_TIME.lock().await;
    let ds = Dataset::counter(0, 1)
        .shuffle(100, Some(1))
        .map_parallel(AUTOTUNE, |x| x + 1)
        .batch(8)
        .prefetch(AUTOTUNE);
    let mut epoch = ds.iter();
    drain_for(&mut epoch, Duration::from_millis(300), bursty).await;
    let report = epoch.stats().to_string();
    let shuffle = stage(&epoch, "shuffle");
    assert!(shuffle.buffered_avg > 0.0, "{shuffle:?}");
    assert!(report.contains(" auto"), "{report}");
    assert!(report.contains("buffers: ~"), "{report}");
    assert!(report.contains(" of 100"), "{report}");
}
