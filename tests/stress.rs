//! Failure under stress: many pipelines at once in one runtime, and (below) random pipelines
//! of every spawning stage with concurrent epochs, random drops, injected errors and a faulty
//! store; afterwards threads, file descriptors, tasks and memory are back at their baseline,
//! every error was delivered and no element was delivered twice.
//!
//! The random test runs 16 rounds of 10 concurrent epochs (a few seconds); with
//! `STREAMLOAD_STRESS_SECS=N` it runs rounds for N seconds instead:
//! `STREAMLOAD_STRESS_SECS=600 cargo test --release --test stress` (with a fresh random
//! seed, printed; `STREAMLOAD_STRESS_SEED` replays one). The sources are a range,
//! a generator, a parallel interleave, local TFRecord shards and the same shards in an S3
//! store behind a fault proxy (503s, cut and reset bodies, ridden out by streamload's
//! retries within `ReadOptions::retry_deadline`); the stages every spawning one
//! (`map_parallel` with injected errors, `prefetch`, `map_async`, `random_map`, readers).
//! Memory is checked as tests/memory.rs does (live heap bytes, by a counting allocator).

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

// ---------------------------------------------------------------------------------------------
// Random pipelines of every spawning stage, concurrent epochs, random drops, injected errors
// and a faulty store.
// ---------------------------------------------------------------------------------------------

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use rand::{Rng, SeedableRng};
use streamload::storage::{self, ReadOptions};
use streamload::{Dataset, ErrorBudget};

#[path = "support/s3.rs"]
mod s3;

/// Live heap bytes (this test binary's own allocator).
static LIVE: AtomicUsize = AtomicUsize::new(0);

struct Counting;

// SAFETY: every call goes to `System`; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: as `System::alloc`.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: as `System::alloc_zeroed`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as `System::dealloc`.
        unsafe { System.dealloc(p, layout) }
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        LIVE.fetch_add(size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as `System::realloc`.
        unsafe { System.realloc(p, layout, size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// An error injected by a user function, for the element `0`.
#[derive(Debug)]
struct Injected(u64);

impl std::fmt::Display for Injected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "injected error for element {}", self.0)
    }
}

impl std::error::Error for Injected {}

/// What the process holds: threads, and file descriptors (sockets apart: the others).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Held {
    threads: usize,
    files: usize,
    sockets: usize,
}

fn held() -> Held {
    let threads = std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count());
    let (mut files, mut sockets) = (0, 0);
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        for entry in dir.flatten() {
            match std::fs::read_link(entry.path()) {
                Ok(target) if target.to_string_lossy().starts_with("socket:") => sockets += 1,
                _ => files += 1,
            }
        }
    }
    Held {
        threads,
        files,
        sockets,
    }
}

const SHARDS: u64 = 4;
const PER_SHARD: u64 = 150;
/// Elements whose id is a multiple of this fail in the user function that injects errors.
const BAD: u64 = 37;

/// A record of `id`: its 8 bytes, padded to 100 bytes.
fn record(id: u64) -> Vec<u8> {
    let mut r = id.to_le_bytes().to_vec();
    r.resize(100, 0xab);
    r
}

fn id_of(record: &[u8]) -> anyhow::Result<u64> {
    let bytes: [u8; 8] = record
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| anyhow::anyhow!("short record"))?;
    Ok(u64::from_le_bytes(bytes))
}

/// The shards' bytes: shard `s` holds ids `s * PER_SHARD ..`.
async fn shard_bytes() -> anyhow::Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for s in 0..SHARDS {
        let mut writer = TFRecordWriter::new(Vec::new(), Compression::None);
        for id in s * PER_SHARD..(s + 1) * PER_SHARD {
            writer.write(&record(id)).await?;
        }
        out.push(writer.finish().await?);
    }
    Ok(out)
}

/// Where a random pipeline's ids come from.
#[derive(Debug, Clone)]
enum Source {
    Range,
    Generator,
    Interleave,
    Local(Vec<String>),
    Store(Vec<String>),
}

/// A random pipeline over `source`, and whether it injects errors (each a `BAD` multiple).
fn pipeline(source: &Source, rng: &mut rand_chacha::ChaCha8Rng) -> (Dataset<u64>, bool) {
    let n = SHARDS * PER_SHARD;
    let mut ds = match source {
        Source::Range => Dataset::range(0, n as i64).map(|x| x as u64),
        Source::Generator => Dataset::from_generator(rng.random_range(1..64), move || 0..n),
        Source::Interleave => {
            let cycle = rng.random_range(1..4usize);
            let calls = rng.random_range(1..4usize);
            Dataset::range(0, SHARDS as i64).parallel_interleave(cycle, 1, calls, |s| {
                let s = s as u64;
                Dataset::range((s * PER_SHARD) as i64, ((s + 1) * PER_SHARD) as i64)
                    .map(|x| x as u64)
            })
        }
        Source::Local(files) | Source::Store(files) => TFRecordDataset::new(files.clone())
            .num_parallel_reads(rng.random_range(1..4usize))
            .build()
            .try_map(|r| id_of(&r)),
    };
    let mut injects = false;
    for _ in 0..rng.random_range(1..4) {
        ds = match rng.random_range(0..6) {
            0 => {
                injects = true;
                ds.try_map_parallel(rng.random_range(1..8usize), |x| {
                    if x % BAD == 0 {
                        Err(Injected(x).into())
                    } else {
                        Ok(x)
                    }
                })
            }
            1 => ds.map_parallel(rng.random_range(1..8usize), |x| x),
            2 => ds.prefetch(rng.random_range(1..32)),
            3 => ds.map_async(rng.random_range(1..8usize), |x| async move {
                tokio::task::yield_now().await;
                x
            }),
            4 => ds.random_map(rng.random_range(1..4usize), Some(7), |x, _| x),
            _ => ds.shuffle(rng.random_range(1..64), Some(rng.random())),
        };
    }
    (ds, injects)
}

/// Runs one epoch of `dataset`, to the end or (with `drop_after`) dropped after that many
/// items; checks that no element came twice and, run to the end, that every element and
/// every injected error came exactly once.
async fn epoch(
    dataset: Dataset<u64>,
    injects: bool,
    drop_after: Option<usize>,
) -> anyhow::Result<()> {
    let n = SHARDS * PER_SHARD;
    let mut seen = HashSet::new();
    let mut failed = HashSet::new();
    let mut items = dataset.iter();
    let mut taken = 0;
    while let Some(item) = items.next().await {
        match item {
            Ok(x) => anyhow::ensure!(seen.insert(x), "element {x} twice"),
            Err(e) => match e.downcast_ref::<Injected>() {
                Some(Injected(x)) => anyhow::ensure!(failed.insert(*x), "error {x} twice"),
                None => return Err(e.context("an error nobody injected")),
            },
        }
        taken += 1;
        if drop_after.is_some_and(|k| taken >= k) {
            return Ok(());
        }
    }
    let bad: HashSet<u64> = (0..n).filter(|x| injects && x % BAD == 0).collect();
    anyhow::ensure!(failed == bad, "errors lost: {:?}", bad.difference(&failed));
    anyhow::ensure!(
        seen.len() as u64 + failed.len() as u64 == n && seen.is_disjoint(&failed),
        "{} elements and {} errors of {n}",
        seen.len(),
        failed.len()
    );
    Ok(())
}

/// Waits (up to `HANG`) until the process holds no more than `baseline` (threads and files
/// exactly; the store's connections are not pooled here, so sockets too).
async fn settle(baseline: Held, tasks: usize) -> Held {
    let deadline = std::time::Instant::now() + HANG;
    loop {
        let now = held();
        let alive = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
        // Run by `block_on`, which is no task.
        let settled = now.threads <= baseline.threads
            && now.files <= baseline.files
            && now.sockets <= baseline.sockets
            && alive <= tasks;
        if settled || std::time::Instant::now() > deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn random_pipelines_under_stress_leave_nothing_behind() -> anyhow::Result<()> {
    // Bounded for CI; STREAMLOAD_STRESS_SECS runs rounds for that long instead.
    let seconds: Option<u64> = std::env::var("STREAMLOAD_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok());
    // Each round is 10 epochs at once (about 0.5 s in debug on 2 cores).
    let rounds_in_ci = 16;
    // The servers run on a runtime of their own: their tasks are not the pipelines'.
    let servers = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(16)
        // Idle blocking threads leave quickly, so the count goes back to its baseline.
        .thread_keep_alive(Duration::from_millis(100))
        .enable_all()
        .build()?;

    let shards = runtime.block_on(shard_bytes())?;
    let dir = tempfile::tempdir()?;
    let mut local = Vec::new();
    let objects = s3::MemoryS3::default();
    let mut remote = Vec::new();
    for (s, bytes) in shards.iter().enumerate() {
        let path = dir.path().join(format!("shard-{s}.tfrecord"));
        std::fs::write(&path, bytes)?;
        local.push(path.display().to_string());
        let key = format!("stress/shard-{s}.tfrecord");
        objects.insert("stress", &key, bytes::Bytes::from(bytes.clone()));
        remote.push(format!("s3://stress/{key}"));
    }
    // A faulty store: 503s, cut and reset bodies through a proxy; object_store's own
    // retries off and no connection pooling, so streamload's retries and resumes do the work
    // and no idle connection outlives its request.
    let faults = Arc::new(s3::Faults {
        slow_downs: AtomicUsize::new(0),
        cut_after: 3000,
        ..Default::default()
    });
    let proxy = servers.block_on(async {
        let server = s3::memory_s3_server(objects, "AKIDSTRESS", "stress-secret").await;
        s3::fault_proxy(server, Arc::clone(&faults)).await
    });
    let store = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(format!("http://{proxy}"))
        .with_allow_http(true)
        .with_bucket_name("stress")
        .with_region("us-east-1")
        .with_access_key_id("AKIDSTRESS")
        .with_secret_access_key("stress-secret")
        .with_client_options(
            object_store::ClientOptions::new()
                .with_allow_http(true)
                .with_pool_max_idle_per_host(0),
        )
        .with_retry(object_store::RetryConfig {
            max_retries: 0,
            ..Default::default()
        })
        .build()?;
    storage::register_with(
        "s3://stress",
        Arc::new(store),
        ReadOptions::default()
            .block_size(4096)
            .backoff(Duration::from_millis(5), Duration::from_millis(50))
            .retry_deadline(Duration::from_secs(30)),
    )?;

    let sources = [
        Source::Range,
        Source::Generator,
        Source::Interleave,
        Source::Local(local),
        Source::Store(remote),
    ];
    // A fixed seed in CI; a fresh one (printed, and taken from STREAMLOAD_STRESS_SEED to
    // replay a failure) for longer runs.
    let seed = std::env::var("STREAMLOAD_STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| match seconds {
            Some(_) => rand::random(),
            None => 0x5157_2e55,
        });
    println!("stress seed: STREAMLOAD_STRESS_SEED={seed}");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let started = std::time::Instant::now();
    let round = |rng: &mut rand_chacha::ChaCha8Rng| -> anyhow::Result<()> {
        // Faults for this round: a burst of 503s and broken bodies (each within the retry
        // deadline, so every record is delivered once).
        faults
            .slow_downs
            .store(rng.random_range(0..6), Ordering::SeqCst);
        faults.cuts.store(rng.random_range(0..4), Ordering::SeqCst);
        faults
            .resets
            .store(rng.random_range(0..3), Ordering::SeqCst);
        let mut epochs = Vec::new();
        for source in &sources {
            for _ in 0..2 {
                let (dataset, injects) = pipeline(source, rng);
                let drop_after = rng
                    .random_bool(0.4)
                    .then(|| rng.random_range(0..(SHARDS * PER_SHARD) as usize));
                epochs.push((format!("{source:?}"), dataset, injects, drop_after));
            }
        }
        // Now and then a throttling storm: every open connection cut, every new one answered
        // 503 for a while (well within the retry deadline).
        let storm = rng.random_bool(0.5).then(|| {
            let (start, length) = (rng.random_range(0..100u64), rng.random_range(50..400u64));
            let faults = Arc::clone(&faults);
            servers.spawn(async move {
                tokio::time::sleep(Duration::from_millis(start)).await;
                faults.start_storm();
                tokio::time::sleep(Duration::from_millis(length)).await;
                faults.end_storm();
            })
        });
        runtime.block_on(async {
            let mut running = Vec::new();
            for (name, dataset, injects, drop_after) in epochs {
                let name = name.chars().take(40).collect::<String>();
                running.push((name, tokio::spawn(epoch(dataset, injects, drop_after))));
            }
            for (name, task) in running {
                tokio::time::timeout(HANG, task)
                    .await
                    .map_err(|_| anyhow::anyhow!("{name}: no end in {HANG:?}"))?
                    .map_err(|e| anyhow::anyhow!("{name}: {e}"))?
                    .map_err(|e| e.context(name))?;
            }
            if let Some(storm) = storm {
                storm.await?;
            }
            anyhow::Ok(())
        })
    };

    // A first round brings pools, caches and the store's client to their size; then the
    // baseline is taken (idle threads given time to leave).
    round(&mut rng)?;
    std::thread::sleep(Duration::from_millis(1500));
    let baseline = held();
    let tasks = runtime.metrics().num_alive_tasks();
    let memory = LIVE.load(Ordering::Relaxed);

    let mut rounds = 0;
    loop {
        round(&mut rng)?;
        rounds += 1;
        let done = match seconds {
            Some(s) => started.elapsed() >= Duration::from_secs(s),
            None => rounds >= rounds_in_ci,
        };
        if done {
            break;
        }
    }
    // A budget over an injected-error pipeline delivers its errors or fails with them: no
    // error is lost to a cancellation race.
    let over_budget = runtime.block_on(
        Dataset::range(0, 1000)
            .try_map_parallel(8, |x| {
                if x % 10 == 0 {
                    Err(Injected(x as u64).into())
                } else {
                    Ok(x)
                }
            })
            .prefetch(4)
            .ignore_errors_within(ErrorBudget::count(5))
            .collect(),
    );
    let err = over_budget.expect_err("past the budget");
    assert!(
        matches!(err.downcast_ref::<Injected>(), Some(Injected(50))),
        "{err:#}"
    );

    assert!(
        faults.fired.load(Ordering::SeqCst) > 0,
        "the faulty store broke no body: the rounds did not test it"
    );
    let after = runtime.block_on(settle(baseline, tasks));
    assert!(
        after.threads <= baseline.threads
            && after.files <= baseline.files
            && after.sockets <= baseline.sockets,
        "after {rounds} rounds: {after:?}, baseline {baseline:?}"
    );
    let alive = runtime.metrics().num_alive_tasks();
    assert!(
        alive <= tasks,
        "{alive} tasks alive, {tasks} at the baseline"
    );
    let live = LIVE.load(Ordering::Relaxed);
    // Pools and caches keep what the first round made them; a leak per epoch or per element
    // (rounds x 10 epochs x 600 elements) is far more than this.
    let slack = 512 * 1024;
    assert!(
        live <= memory + slack,
        "the heap grew from {memory} to {live} bytes over {rounds} rounds"
    );
    drop(runtime);
    servers.shutdown_timeout(Duration::from_secs(1));
    Ok(())
}
