//! The benchmark workloads of WORKLOADS.md (at the repository root), defined once and used by
//! both the criterion benches (`benches/`) and `examples/workloads.rs`.
//!
//! Each workload is an async function that runs one full pass and returns what it counted, so
//! the caller can time it and turn it into the workload's figure.
#![allow(dead_code, unreachable_pub)] // each includer uses the workloads it measures; `pub` is for them

use std::hint::black_box;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use futures::StreamExt;
use streamload::{AUTOTUNE, Dataset, Epoch, Options, Parallelism, available_cores};

static AUTOTUNE_ALL: AtomicBool = AtomicBool::new(false);
static REPORT: AtomicBool = AtomicBool::new(false);
/// The pipelines' memory budget in bytes (0: the default).
static RAM_BUDGET: AtomicU64 = AtomicU64::new(0);

/// `autotune`: every parallelism and buffer the workloads set becomes `AUTOTUNE` (the
/// workloads example's `--autotune`); `report`: each workload times its stages and prints its
/// stage report to stderr (`--report`); `ram_budget`: `Options::ram_budget` for every
/// workload (`--ram-budget`).
pub fn set_mode(autotune: bool, report: bool, ram_budget: Option<u64>) {
    AUTOTUNE_ALL.store(autotune, Ordering::Relaxed);
    REPORT.store(report, Ordering::Relaxed);
    RAM_BUDGET.store(ram_budget.unwrap_or(0), Ordering::Relaxed);
}

/// Turns `AUTOTUNE` for every parallelism and buffer on or off between passes (the
/// workloads example's `--autotune` alternates passes with and without it).
pub fn set_autotune(on: bool) {
    AUTOTUNE_ALL.store(on, Ordering::Relaxed);
}

/// The sizes of WORKLOADS.md's data sets: D1's shards and records per shard, D2's JPEGs,
/// D3's lines.
pub const D1_SHARDS: usize = 16;
/// Records per D1 shard.
pub const D1_RECORDS: usize = 8192;
/// JPEGs in D2.
pub const D2_IMAGES: usize = 2000;
/// Lines in D3.
pub const D3_LINES: usize = 2_000_000;

/// `n` divided by `scale_down` (at least 1): the workloads example's `--scale-down`.
pub fn scaled(n: usize, scale_down: usize) -> usize {
    (n / scale_down.max(1)).max(1)
}

/// Every tunable set to this instead (0: as WORKLOADS.md sets it): `--fixed N`, for sweeps.
static FIXED: AtomicU64 = AtomicU64::new(0);

/// Under `--fixed N`, every parallelism and buffer the workloads set is `N` (hand-tuning
/// sweeps to compare `--autotune` against).
pub fn set_fixed(n: Option<usize>) {
    FIXED.store(n.unwrap_or(0) as u64, Ordering::Relaxed);
}

/// The multi-threaded tokio runtime the criterion benches run their workloads on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// `n` as WORKLOADS.md sets it, `AUTOTUNE` under `--autotune`, or `--fixed N`.
pub fn tuned(n: usize) -> Parallelism {
    if AUTOTUNE_ALL.load(Ordering::Relaxed) {
        return AUTOTUNE;
    }
    match FIXED.load(Ordering::Relaxed) {
        0 => Parallelism::Fixed(n),
        fixed => Parallelism::Fixed(fixed as usize),
    }
}

/// The options every workload runs with: stage timing when reports are wanted.
fn options() -> Options {
    let options = Options::new().stats_timing(REPORT.load(Ordering::Relaxed));
    match RAM_BUDGET.load(Ordering::Relaxed) {
        0 => options,
        bytes => options.ram_budget(bytes),
    }
}

/// Runs one epoch of `ds`, counting its elements; prints the report under `--report`.
async fn count_reported<T: Send + 'static>(workload: &str, ds: &Dataset<T>) -> anyhow::Result<u64> {
    let mut epoch = ds.iter();
    let mut n = 0u64;
    while let Some(item) = epoch.next().await {
        item?;
        n += 1;
    }
    report(workload, &epoch);
    Ok(n)
}

/// Prints `epoch`'s stage report to stderr under `--report`.
fn report<T>(workload: &str, epoch: &Epoch<T>) {
    if REPORT.load(Ordering::Relaxed) {
        eprintln!("{workload} stage report:\n{}", epoch.stats());
    }
}

/// W1 overhead: range -> map(x*2) -> filter(x % 3 == 0) -> batch(1024) -> prefetch(4).
/// Returns the number of elements that reach the consumer.
pub async fn w1_overhead(n: i64) -> anyhow::Result<u64> {
    let ds = Dataset::range(0, n)
        .map(|x| x * 2)
        .filter(|x| x % 3 == 0)
        .batch(1024)
        .prefetch(tuned(4))
        .with_options(options());
    let mut epoch = ds.iter();
    let mut count = 0u64;
    while let Some(batch) = epoch.next().await {
        count += batch?.len() as u64;
    }
    report("W1", &epoch);
    Ok(count)
}

/// Iterations of [`cpu_work`] that take about 0.5 ms on the project's machines.
pub const HALF_MS: u64 = 141_000;
/// Iterations of [`cpu_work`] that take about 0.2 ms.
pub const FIFTH_MS: u64 = HALF_MS * 2 / 5;

/// Pure CPU work: `iterations` rounds of a 64-bit mixing hash (SplitMix64's finaliser).
pub fn cpu_work(seed: i64, iterations: u64) -> u64 {
    let mut z = seed as u64;
    for _ in 0..iterations {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
    }
    black_box(z)
}

/// W4 cpu-map scaling: range(n) -> map_parallel(p, ~0.5 ms of hashing). Returns the count.
pub async fn w4_cpu_map(n: i64, parallelism: usize) -> anyhow::Result<u64> {
    let parallelism = if parallelism > 1 {
        tuned(parallelism)
    } else {
        Parallelism::Fixed(1)
    };
    let ds = Dataset::range(0, n)
        .map_parallel(parallelism, |x| cpu_work(x, HALF_MS))
        .with_options(options());
    count_reported("W4", &ds).await
}

/// W7a: a blocking generator that does ~0.2 ms of work per (x, y) element, consumed as-is.
pub async fn w7_generator(n: i64) -> anyhow::Result<u64> {
    Dataset::from_generator(16, move || (0..n).map(|i| (i, cpu_work(i, FIFTH_MS))))
        .count()
        .await
}

/// W7b: an index generator, with the ~0.2 ms of work moved into a parallel map.
pub async fn w7_index_generator_parallel_map(n: i64) -> anyhow::Result<u64> {
    let ds = Dataset::from_generator(16, move || 0..n)
        .map_parallel(tuned(available_cores()), |i| (i, cpu_work(i, FIFTH_MS)))
        .with_options(options());
    count_reported("W7b", &ds).await
}

/// D1 of WORKLOADS.md: `shards` TFRecord files of `records` serialized `tf.train.Example`s
/// each (`image`: 1000..3000 random bytes, `label`: 0..999, `weights`: 16 floats), written
/// plain under `dir/tfrecord/` and GZIP-compressed under `dir/tfrecord-gz/`. Seeded: the same
/// bytes on every machine. Returns the payload bytes written per variant.
pub async fn generate_d1(
    dir: &std::path::Path,
    shards: usize,
    records: usize,
) -> anyhow::Result<u64> {
    use rand::{Rng, RngCore, SeedableRng};
    use streamload::format::{Compression, Example, TFRecordWriter};

    let plain = dir.join("tfrecord");
    let gz = dir.join("tfrecord-gz");
    tokio::fs::create_dir_all(&plain).await?;
    tokio::fs::create_dir_all(&gz).await?;
    let mut total = 0u64;
    for shard in 0..shards {
        let name = format!("train-{shard:05}-of-{shards:05}.tfrecord");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0xD1 ^ shard as u64);
        let mut a = TFRecordWriter::new(
            tokio::io::BufWriter::new(tokio::fs::File::create(plain.join(&name)).await?),
            Compression::None,
        );
        let mut b = TFRecordWriter::new(
            tokio::io::BufWriter::new(
                tokio::fs::File::create(gz.join(format!("{name}.gz"))).await?,
            ),
            Compression::Gzip,
        );
        let mut image = vec![0u8; 3000];
        for _ in 0..records {
            let len = rng.random_range(1000..3000);
            rng.fill_bytes(&mut image[..len]);
            let weights: Vec<f32> = (0..16).map(|_| rng.random::<f32>()).collect();
            let example = Example::new()
                .with_bytes("image", [&image[..len]])
                .with_int64("label", [rng.random_range(0..1000)])
                .with_floats("weights", weights);
            let payload = example.encode_to_bytes();
            total += payload.len() as u64;
            a.write(&payload).await?;
            b.write(&payload).await?;
        }
        use tokio::io::AsyncWriteExt;
        a.finish().await?.flush().await?;
        b.finish().await?.flush().await?;
    }
    Ok(total)
}

/// The D1 shard paths under `dir/tfrecord` (or `dir/tfrecord-gz`), sorted.
pub fn d1_files(dir: &std::path::Path, gz: bool) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let sub = dir.join(if gz { "tfrecord-gz" } else { "tfrecord" });
    let mut files: Vec<_> = std::fs::read_dir(&sub)
        .map_err(|e| {
            anyhow::anyhow!(
                "reading {}: {e} (generate the data with --generate)",
                sub.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    anyhow::ensure!(!files.is_empty(), "no files in {}", sub.display());
    Ok(files)
}

/// W2's read: the files -> interleave(TFRecord reader, cycle 4, 4 parallel) -> records
/// (every CRC checked), GZIP-compressed or not.
fn d1_records<L: Into<streamload::storage::Location>>(
    files: impl IntoIterator<Item = L>,
    gz: bool,
) -> Dataset<bytes::Bytes> {
    use streamload::format::{Compression, TFRecordDataset};
    TFRecordDataset::new(files)
        .compression(if gz {
            Compression::Gzip
        } else {
            Compression::None
        })
        .num_parallel_reads(tuned(4))
        .build()
}

/// W2 tfrecord-raw: W2's read, nondeterministic -> count records and payload bytes.
pub async fn w2_tfrecord_raw(
    files: Vec<std::path::PathBuf>,
    gz: bool,
) -> anyhow::Result<(u64, u64)> {
    let ds = d1_records(files, gz).with_options(options().deterministic(false));
    let (mut records, mut bytes) = (0u64, 0u64);
    let mut epoch = ds.iter();
    while let Some(record) = epoch.next().await {
        records += 1;
        bytes += record?.len() as u64;
    }
    report(if gz { "W2gz" } else { "W2" }, &epoch);
    Ok((records, bytes))
}

/// A parsed W3 record.
pub struct W3Record {
    pub image: bytes::Bytes,
    pub label: i64,
    pub weights: Vec<f32>,
}

/// W3's pipeline: W2's read -> shuffle(10,000) -> map_parallel(parse the Example into image
/// bytes, label, weights) -> batch(256) -> prefetch(AUTOTUNE); W3 runs it nondeterministic,
/// W9 (checkpoints) deterministic.
pub fn w3_dataset<L: Into<streamload::storage::Location>>(
    files: impl IntoIterator<Item = L>,
    deterministic: bool,
) -> anyhow::Result<Dataset<Vec<W3Record>>> {
    use streamload::format::{FeatureSpec, ParseSpec};
    use streamload::tensor::DType;
    let spec = ParseSpec::new([
        ("image", FeatureSpec::fixed_len([], DType::String)),
        ("label", FeatureSpec::fixed_len([], DType::Int64)),
        ("weights", FeatureSpec::fixed_len([16], DType::Float32)),
    ])?;
    Ok(d1_records(files, false)
        .shuffle(10_000, Some(3))
        .try_map_parallel(tuned(available_cores()), move |payload| {
            let example = streamload::format::parse_single_example_view(&payload, &spec)?;
            Ok(W3Record {
                image: example.bytes("image")?.next().unwrap_or_default(),
                label: example.int64("label")?.next().unwrap_or_default(),
                weights: example.floats("weights")?.collect(),
            })
        })
        .named("parse")
        .batch(256)
        .prefetch(match FIXED.load(Ordering::Relaxed) {
            0 => AUTOTUNE,
            n => Parallelism::Fixed(n as usize),
        })
        .with_options(options().deterministic(deterministic)))
}

/// Consumes one W3 batch as the workloads do.
fn consume(batch: &[W3Record]) {
    black_box(
        batch
            .iter()
            .map(|r| r.label + r.image.len() as i64 + r.weights.len() as i64)
            .sum::<i64>(),
    );
}

/// W3 tfrecord-parse: [`w3_dataset`], nondeterministic. Returns the records.
pub async fn w3_tfrecord_parse(files: Vec<std::path::PathBuf>) -> anyhow::Result<u64> {
    let ds = w3_dataset(files, false)?;
    let mut records = 0u64;
    let mut epoch = ds.iter();
    while let Some(batch) = epoch.next().await {
        let batch = batch?;
        records += batch.len() as u64;
        consume(&batch);
    }
    report("W3", &epoch);
    Ok(records)
}

/// W9: one epoch of W3's pipeline in deterministic order, taking a checkpoint (serialized
/// to bytes, as a training job saves it) each time `batches` (counted across passes) reaches
/// a multiple of `every`. Returns the records and the checkpoints taken.
pub async fn w9_pass(
    ds: &Dataset<Vec<W3Record>>,
    every: Option<u64>,
    batches: &mut u64,
) -> anyhow::Result<(u64, u64)> {
    let (mut records, mut taken) = (0u64, 0u64);
    let mut epoch = ds.iter();
    while let Some(batch) = epoch.next().await {
        let batch = batch?;
        records += batch.len() as u64;
        consume(&batch);
        *batches += 1;
        if every.is_some_and(|n| *batches % n == 0) {
            black_box(epoch.checkpoint()?.to_bytes());
            taken += 1;
        }
    }
    Ok((records, taken))
}

/// W9's state and resume: an epoch of W3's pipeline (deterministic) stopped after `stop`
/// batches; returns the checkpoint's size in bytes, the time to take it, and the time from
/// `iter_from` to the first batch of the resumed epoch (a fresh recipe, as a new process).
/// `files`: D1's files, local paths or URLs.
pub async fn w9_resume<L>(files: Vec<L>, stop: usize) -> anyhow::Result<(usize, f64, f64)>
where
    L: Into<streamload::storage::Location> + Clone,
{
    let ds = w3_dataset(files.clone(), true)?;
    let mut epoch = ds.iter();
    for _ in 0..stop {
        consume(
            &epoch
                .next()
                .await
                .ok_or_else(|| anyhow::anyhow!("W9: the epoch ended"))??,
        );
    }
    let started = std::time::Instant::now();
    let bytes = epoch.checkpoint()?.to_bytes();
    let take = started.elapsed().as_secs_f64();
    drop(epoch);
    let fresh = w3_dataset(files, true)?;
    let started = std::time::Instant::now();
    let checkpoint = streamload::Checkpoint::from_bytes(&bytes)?;
    let mut resumed = fresh.iter_from(&checkpoint)?;
    consume(
        &resumed
            .next()
            .await
            .ok_or_else(|| anyhow::anyhow!("W9: nothing after resume"))??,
    );
    let resume = started.elapsed().as_secs_f64();
    Ok((bytes.len(), take, resume))
}

/// W3's read alone (W2's read handing over one record at a time), to set beside W3: what
/// the pipeline has left for the rest. Returns the records.
pub async fn w3_read(files: Vec<std::path::PathBuf>) -> anyhow::Result<u64> {
    let ds = d1_records(files, false).with_options(options().deterministic(false));
    count_reported("W3/read", &ds).await
}

/// W3 with its parse replaced by taking the record's length: what the parse costs. Returns
/// the records.
pub async fn w3_no_parse(files: Vec<std::path::PathBuf>) -> anyhow::Result<u64> {
    let ds = d1_records(files, false)
        .shuffle(10_000, Some(3))
        .map_parallel(tuned(available_cores()), |payload| payload.len())
        .batch(256)
        .prefetch(AUTOTUNE)
        .with_options(options().deterministic(false));
    let mut records = 0u64;
    let mut epoch = ds.iter();
    while let Some(batch) = epoch.next().await {
        records += black_box(batch?).len() as u64;
    }
    report("W3/no-parse", &epoch);
    Ok(records)
}

/// D3 of WORKLOADS.md: `dir/text/lines.txt`, `lines` lines of 4..12 lowercase words from a
/// 5,000-word vocabulary (seeded). Returns the bytes written.
pub fn generate_d3(dir: &std::path::Path, lines: usize) -> anyhow::Result<u64> {
    use std::io::Write;

    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0xD3);
    let vocabulary: Vec<String> = (0..5000)
        .map(|_| {
            (0..rng.random_range(3..10))
                .map(|_| rng.random_range(b'a'..=b'z') as char)
                .collect()
        })
        .collect();
    std::fs::create_dir_all(dir.join("text"))?;
    let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join("text/lines.txt"))?);
    let mut bytes = 0u64;
    for _ in 0..lines {
        let words = rng.random_range(4..=12);
        for w in 0..words {
            let word = &vocabulary[rng.random_range(0..vocabulary.len())];
            if w > 0 {
                out.write_all(b" ")?;
                bytes += 1;
            }
            out.write_all(word.as_bytes())?;
            bytes += word.len() as u64;
        }
        out.write_all(b"\n")?;
        bytes += 1;
    }
    out.flush()?;
    Ok(bytes)
}

/// W6 text: the lines of D3 -> map(split on spaces) -> batch(64) -> prefetch(1). Words are
/// slices of the read buffer (no copy). Returns the lines.
pub async fn w6_text(path: std::path::PathBuf) -> anyhow::Result<u64> {
    use streamload::format::TextLineDataset;
    let ds = TextLineDataset::new([path])
        .build()
        .map(|line| streamload::tensor::StringList::split(line, b' '))
        .batch(64)
        .prefetch(tuned(1))
        .with_options(options());
    let mut lines = 0u64;
    let mut epoch = ds.iter();
    while let Some(batch) = epoch.next().await {
        let batch = batch?;
        lines += batch.len() as u64;
        black_box(batch.iter().map(|words| words.len()).sum::<usize>());
    }
    report("W6", &epoch);
    Ok(lines)
}

#[path = "../../tests/support/s3.rs"]
mod s3;

/// W8's bucket: 32 TFRecord shards of 4 MiB on a local S3 server (s3s over objects in
/// memory, SigV4 checked), behind a proxy that adds `latency` before each response's first
/// byte, registered as `s3://w8-bucket`.
pub struct W8Bucket {
    /// The server's objects and request counters.
    pub server: s3::MemoryS3,
    /// The shards' URLs.
    pub files: Vec<String>,
    /// Payload bytes in all shards.
    pub bytes: u64,
}

/// W9 over object storage: D1's files copied into an in-process S3 server (no added
/// latency) registered as `s3://w9-bucket`; returns their URLs, in `files`' order.
pub async fn w9_s3_setup(files: &[std::path::PathBuf]) -> anyhow::Result<Vec<String>> {
    let server = s3::MemoryS3::default();
    let mut urls = Vec::new();
    for file in files {
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| anyhow::anyhow!("{}: not a file name", file.display()))?;
        server.insert(
            "w9-bucket",
            &format!("d1/{name}"),
            std::fs::read(file)?.into(),
        );
        urls.push(format!("s3://w9-bucket/d1/{name}"));
    }
    let addr = s3::memory_s3_server(server, "AKIDW9", "w9-secret-key").await;
    streamload::storage::register(
        "s3://w9-bucket",
        s3::s3_store(addr, "w9-bucket", "AKIDW9", "w9-secret-key"),
    )?;
    Ok(urls)
}

/// Writes W8's shards and starts the server and the proxy.
pub async fn w8_setup(latency: std::time::Duration) -> anyhow::Result<W8Bucket> {
    use streamload::format::{Compression, TFRecordWriter};
    let server = s3::MemoryS3::default();
    let mut files = Vec::new();
    let mut bytes = 0;
    for s in 0..32 {
        let name = format!("shards/train-{s:05}-of-00032.tfrecord");
        let mut writer = TFRecordWriter::new(Vec::new(), Compression::None);
        // 4 MiB of 4 KiB records (with TFRecord framing).
        for r in 0..1020u32 {
            let payload: Vec<u8> = (0..4096u32).map(|i| (i ^ r ^ s) as u8).collect();
            writer.write(&payload).await?;
            bytes += payload.len() as u64;
        }
        server.insert("w8-bucket", &name, writer.finish().await?.into());
        files.push(format!("s3://w8-bucket/{name}"));
    }
    let addr = s3::memory_s3_server(server.clone(), "AKIDW8", "w8-secret-key").await;
    let faults = std::sync::Arc::new(s3::Faults {
        first_byte_delay: latency,
        ..Default::default()
    });
    let proxy = s3::fault_proxy(addr, faults).await;
    streamload::storage::register(
        "s3://w8-bucket",
        s3::s3_store(proxy, "w8-bucket", "AKIDW8", "w8-secret-key"),
    )?;
    Ok(W8Bucket {
        server,
        files,
        bytes,
    })
}

/// W8: every record of the bucket through `interleave(cycle_length = cycle, block_length = 1,
/// num_parallel_calls = cycle)`: exactly `cycle` shards open at once, the workload as
/// WORKLOADS.md defines it. With `ahead`, the shards are read as users usually write it,
/// `TFRecordDataset::num_parallel_reads(cycle)`, which also opens `cycle` more shards ahead
/// (as tf.data's interleave prefetches input elements). Returns payload bytes.
pub async fn w8_read(files: &[String], cycle: usize, ahead: bool) -> anyhow::Result<u64> {
    use streamload::format::TFRecordDataset;
    let ds = if ahead {
        TFRecordDataset::new(files.iter())
            .num_parallel_reads(cycle)
            .build()
    } else {
        Dataset::from_vec(files.to_vec())
            .parallel_interleave(cycle, 1, cycle, |url| TFRecordDataset::new([url]).build())
    }
    .with_options(streamload::Options::new().deterministic(false));
    let mut bytes = 0u64;
    let mut epoch = ds.iter();
    while let Some(record) = epoch.next().await {
        bytes += record?.len() as u64;
    }
    Ok(bytes)
}

/// D2 of WORKLOADS.md: `n` JPEGs `dir/jpeg/NNNNN.jpg`, 256x256 RGB, quality 90, smooth
/// gradients plus noise (so they compress like photos), and `dir/jpeg/labels.txt` (one label
/// 0..999 per line, in file order). Seeded; written in parallel. Returns the JPEG bytes written.
#[cfg(feature = "image")]
pub async fn generate_d2(dir: &std::path::Path, n: usize) -> anyhow::Result<u64> {
    generate_jpegs(dir.join("jpeg"), (256, 256), 0xD2, n).await
}

/// `n` seeded photo-like JPEGs ([`photo_jpeg`]) of `width` x `height`, `out/NNNNN.jpg`, written
/// in parallel, and `out/labels.txt` (one label 0..999 per line, in file order). Returns the
/// JPEG bytes written.
#[cfg(feature = "image")]
async fn generate_jpegs(
    out: std::path::PathBuf,
    (width, height): (u32, u32),
    seed: u64,
    n: usize,
) -> anyhow::Result<u64> {
    use std::io::Write;

    use rand::{Rng, SeedableRng};
    std::fs::create_dir_all(&out)?;
    let jpegs = out.clone();
    let sizes = Dataset::range(0, n as i64)
        .try_map_parallel(AUTOTUNE, move |i| {
            let bytes = photo_jpeg(width, height, seed ^ i as u64)?;
            std::fs::write(jpegs.join(format!("{i:05}.jpg")), &bytes)?;
            Ok(bytes.len() as u64)
        })
        .collect()
        .await?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut labels = std::io::BufWriter::new(std::fs::File::create(out.join("labels.txt"))?);
    for _ in 0..n {
        writeln!(labels, "{}", rng.random_range(0..1000))?;
    }
    labels.flush()?;
    Ok(sizes.iter().sum())
}

/// A photo-like `width` x `height` JPEG (quality 90): per channel a base level, a slope along x
/// and y, a low-frequency wave, and noise, so it compresses like a photo. Seeded.
#[cfg(feature = "image")]
pub fn photo_jpeg(width: u32, height: u32, seed: u64) -> anyhow::Result<Vec<u8>> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let params: Vec<[f32; 5]> = (0..3)
        .map(|_| {
            [
                rng.random_range(40.0..200.0),
                rng.random_range(-0.4..0.4),
                rng.random_range(-0.4..0.4),
                rng.random_range(10.0..40.0),
                rng.random_range(0.01..0.06),
            ]
        })
        .collect();
    let (cx, cy) = (width as f32 / 2.0, height as f32 / 2.0);
    let img = image::RgbImage::from_fn(width, height, |x, y| {
        let (x, y) = (x as f32 - cx, y as f32 - cy);
        let mut px = [0u8; 3];
        for (c, [base, sx, sy, amp, freq]) in params.iter().enumerate() {
            let wave = amp * ((x + y * 0.7) * freq).sin();
            let noise = rng.random_range(-8.0..8.0);
            px[c] = (base + sx * x + sy * y + wave + noise).clamp(0.0, 255.0) as u8;
        }
        image::Rgb(px)
    });
    let mut bytes = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut bytes, 90).encode_image(&img)?;
    Ok(bytes)
}

/// The (file, label) pairs of D2, in file order.
pub fn d2_files(dir: &std::path::Path) -> anyhow::Result<Vec<(std::path::PathBuf, i64)>> {
    labelled_files(&dir.join("jpeg"), "--generate DIR")
}

/// The (file, label) pairs `sub/NNNNN.jpg` of `sub/labels.txt`, in file order; `how` says how
/// to generate them if they are missing.
fn labelled_files(
    sub: &std::path::Path,
    how: &str,
) -> anyhow::Result<Vec<(std::path::PathBuf, i64)>> {
    let labels = std::fs::read_to_string(sub.join("labels.txt")).map_err(|e| {
        anyhow::anyhow!(
            "reading {}/labels.txt: {e} (generate the data with {how})",
            sub.display()
        )
    })?;
    labels
        .lines()
        .enumerate()
        .map(|(i, label)| Ok((sub.join(format!("{i:05}.jpg")), label.trim().parse()?)))
        .collect()
}

/// W5's decode stage: read the file, decode the JPEG, convert to float [0, 1] and resize to
/// 64x64 (bilinear, half-pixel centres), the last two fused (`convert_and_resize`: bytes in,
/// floats out, no full-size float image).
#[cfg(feature = "image")]
pub fn w5_load(path: &std::path::Path) -> anyhow::Result<ndarray::Array3<f32>> {
    use streamload::image;
    image::convert_and_resize(&image::read_image(path)?, 64, 64)
}

/// W5's augmentation: random flip left-right, brightness +-32/255, saturation 0.5..1.5, clip
/// to [0, 1] (the four tf.image calls, fused into one pass with the same draws and values).
#[cfg(feature = "image")]
pub fn w5_augment(
    img: ndarray::Array3<f32>,
    rng: &mut rand_chacha::ChaCha8Rng,
) -> ndarray::Array3<f32> {
    streamload::image::random_flip_brightness_saturation_clip(
        img,
        32.0 / 255.0,
        (0.5, 1.5),
        (0.0, 1.0),
        rng,
    )
}

/// W5 image: (file, label) pairs -> shuffle(2000) -> map_parallel(read, decode, resize 64x64,
/// to float) -> random_map(flip, brightness, saturation, clip; seeded per element) ->
/// batch(32) -> prefetch(1).
#[cfg(feature = "image")]
pub fn w5_dataset(
    items: Vec<(std::path::PathBuf, i64)>,
) -> Dataset<Vec<(ndarray::Array3<f32>, i64)>> {
    Dataset::from_vec(items)
        .shuffle(2000, Some(5))
        .try_map_parallel(tuned(available_cores()), |(path, label)| {
            Ok((w5_load(&path)?, label))
        })
        .named("decode")
        .random_map(tuned(available_cores()), Some(5), |(img, label), rng| {
            (w5_augment(img, rng), label)
        })
        .named("augment")
        .batch(32)
        .prefetch(tuned(1))
        .with_options(options())
}

/// W5: one epoch of [`w5_dataset`]; returns the images.
#[cfg(feature = "image")]
pub async fn w5_image(items: Vec<(std::path::PathBuf, i64)>) -> anyhow::Result<u64> {
    let mut images = 0u64;
    let mut epoch = w5_dataset(items).iter();
    while let Some(batch) = epoch.next().await {
        let batch = batch?;
        images += batch.len() as u64;
        black_box(
            batch
                .iter()
                .map(|(img, label)| img[[0, 0, 0]] as f64 + *label as f64)
                .sum::<f64>(),
        );
    }
    report("W5", &epoch);
    Ok(images)
}

/// W5's ceiling: JPEGs already in memory decoded one after another on this thread (no file
/// reads, no resize). Returns the images decoded.
#[cfg(feature = "image")]
pub fn w5_decode_one_core(jpegs: &[Vec<u8>]) -> anyhow::Result<u64> {
    for bytes in jpegs {
        black_box(streamload::image::decode_jpeg(bytes)?);
    }
    Ok(jpegs.len() as u64)
}

/// Decode, resize and convert on this thread (W5's decode stage without the file reads).
#[cfg(feature = "image")]
pub fn w5_decode_resize_one_core(jpegs: &[Vec<u8>]) -> anyhow::Result<u64> {
    use streamload::image;
    for bytes in jpegs {
        black_box(image::convert_and_resize(
            &image::decode_jpeg(bytes)?,
            64,
            64,
        )?);
    }
    Ok(jpegs.len() as u64)
}

// ---- W5r, W5b (issue 21): decoding only what is used ----------------------------------------

/// JPEGs in D6.
pub const D6_IMAGES: usize = 1000;

/// D6 of WORKLOADS.md: `n` JPEGs `dir/imagenet/NNNNN.jpg`, ImageNet's typical 500x375 RGB,
/// quality 90, photo-like ([`photo_jpeg`]), and `dir/imagenet/labels.txt` (one label 0..999 per
/// line). Seeded; written in parallel. Returns the JPEG bytes written.
#[cfg(feature = "image")]
pub async fn generate_d6(dir: &std::path::Path, n: usize) -> anyhow::Result<u64> {
    generate_jpegs(dir.join("imagenet"), (500, 375), 0xD6, n).await
}

/// The (file, label) pairs of D6, in file order.
pub fn d6_files(dir: &std::path::Path) -> anyhow::Result<Vec<(std::path::PathBuf, i64)>> {
    labelled_files(&dir.join("imagenet"), "--generate DIR --only D6")
}

/// W5r: W5 with the JPEG decoded at 1/4 scale straight to 64x64 (`decode_jpeg(ratio=4)`), no
/// resize; the same augmentation.
#[cfg(feature = "image")]
pub fn w5r_dataset(
    items: Vec<(std::path::PathBuf, i64)>,
) -> Dataset<Vec<(ndarray::Array3<f32>, i64)>> {
    use anyhow::Context as _;
    use streamload::image;
    Dataset::from_vec(items)
        .shuffle(2000, Some(5))
        .try_map_parallel(tuned(available_cores()), |(path, label)| {
            let bytes = std::fs::read(&path)
                .with_context(|| format!("reading image {}", path.display()))?;
            let img = image::decode_jpeg_scaled(&bytes, 4)
                .with_context(|| format!("decoding image {}", path.display()))?;
            Ok((image::convert_image_dtype(&img), label))
        })
        .named("decode")
        .random_map(tuned(available_cores()), Some(5), |(img, label), rng| {
            (w5_augment(img, rng), label)
        })
        .named("augment")
        .batch(32)
        .prefetch(tuned(1))
        .with_options(options())
}

/// W5r: one epoch of [`w5r_dataset`]; returns the images.
#[cfg(feature = "image")]
pub async fn w5r_image(items: Vec<(std::path::PathBuf, i64)>) -> anyhow::Result<u64> {
    let mut images = 0u64;
    let mut epoch = w5r_dataset(items).iter();
    while let Some(batch) = epoch.next().await {
        let batch = batch?;
        images += batch.len() as u64;
        black_box(batch.iter().map(|(img, _)| img[[0, 0, 0]]).sum::<f32>());
    }
    report("W5r", &epoch);
    Ok(images)
}

/// W5b image-train: D6 -> shuffle(1000) -> random_map(read file, decode-and-random-crop
/// (area 0.08..1, aspect 3/4..4/3, 10 attempts, whole image as fallback), resize 224x224
/// bilinear, random flip, to float normalised by ImageNet's mean and std) -> batch(64) ->
/// collate into (Array4<f32>, Array1<i64>) -> prefetch(autotune).
#[cfg(feature = "image")]
pub fn w5b_dataset(
    items: Vec<(std::path::PathBuf, i64)>,
) -> Dataset<(ndarray::Array4<f32>, ndarray::Array1<i64>)> {
    use anyhow::Context as _;
    use streamload::image::RandomResizedCrop;
    let train = RandomResizedCrop::new(224, 224);
    Dataset::from_vec(items)
        .shuffle(1000, Some(5))
        .try_random_map(
            tuned(available_cores()),
            Some(5),
            move |(path, label), rng| {
                let bytes = std::fs::read(&path)
                    .with_context(|| format!("reading image {}", path.display()))?;
                let img = train
                    .apply(&bytes, rng)
                    .with_context(|| format!("decoding image {}", path.display()))?;
                Ok((img, label))
            },
        )
        .named("decode_crop")
        .batch(64)
        .collate()
        .prefetch(AUTOTUNE)
        .with_options(options())
}

/// W5b: one epoch of [`w5b_dataset`]; returns the images.
#[cfg(feature = "image")]
pub async fn w5b_image(items: Vec<(std::path::PathBuf, i64)>) -> anyhow::Result<u64> {
    let mut images = 0u64;
    let mut epoch = w5b_dataset(items).iter();
    while let Some(batch) = epoch.next().await {
        let (pixels, labels) = batch?;
        images += labels.len() as u64;
        black_box(pixels[[0, 0, 0, 0]]);
    }
    report("W5b", &epoch);
    Ok(images)
}

/// One-core decode rates of JPEGs in memory (no file reads), one pass each, in images/s:
/// `full` (`decode_jpeg`, libjpeg-turbo), `crop` (the centre half of the area,
/// `decode_and_crop_jpeg`), `1/2` and `1/4` (`decode_jpeg_scaled`).
#[cfg(feature = "image")]
pub fn decode_rates_one_core(jpegs: &[Vec<u8>]) -> anyhow::Result<Vec<(&'static str, f64)>> {
    use std::time::Instant;
    use streamload::image;
    let mut rates = Vec::new();
    let mut time = |name: &'static str, f: &dyn Fn(&[u8]) -> anyhow::Result<usize>| {
        let start = Instant::now();
        let mut sum = 0;
        for bytes in jpegs {
            sum += f(bytes)?;
        }
        black_box(sum);
        rates.push((name, jpegs.len() as f64 / start.elapsed().as_secs_f64()));
        anyhow::Ok(())
    };
    time("full", &|b| Ok(image::decode_jpeg(b)?.len()))?;
    time("crop", &|b| {
        let (h, w) = image::extract_jpeg_shape(b)?;
        // The centre 0.7 x 0.7 of each side: about half the area.
        let (ch, cw) = (h * 7 / 10, w * 7 / 10);
        Ok(image::decode_and_crop_jpeg(b, [(h - ch) / 2, (w - cw) / 2, ch, cw])?.len())
    })?;
    time("1/2", &|b| Ok(image::decode_jpeg_scaled(b, 2)?.len()))?;
    time("1/4", &|b| Ok(image::decode_jpeg_scaled(b, 4)?.len()))?;
    Ok(rates)
}

/// Shards in D4.
pub const D4_SHARDS: usize = 16;
/// Samples per D4 shard.
pub const D4_SAMPLES: usize = 1000;

/// D4 of WORKLOADS.md: `shards` WebDataset shards `dir/wds/train-NNNNNN.tar` of `per_shard`
/// samples, key `sNNNNNN`, members `KEY.cls` (the label), `KEY.jpg` (D2's image `i mod n`, its
/// bytes as they are) and `KEY.json` (`{"i": i, "label": l}`), in that order (the Python
/// `TarWriter`'s, which sorts a sample's fields). Written with streamload's `ShardWriter`
/// from D2 (which must be there); the tar layout is the one the Python package writes (ustar
/// headers, one per member). Returns the bytes of the shards.
pub async fn generate_d4(
    dir: &std::path::Path,
    shards: usize,
    per_shard: usize,
) -> anyhow::Result<u64> {
    use streamload::format::{Sample, ShardWriter};
    let images = d2_files(dir)?;
    anyhow::ensure!(
        !images.is_empty(),
        "D4 needs D2's images: generate D2 first"
    );
    let out = dir.join("wds");
    std::fs::create_dir_all(&out)?;
    let pattern = out.join("train-%06d.tar");
    let pattern = pattern
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("a non-UTF-8 directory"))?;
    let mut writer = ShardWriter::new(pattern)?.max_samples(per_shard as u64);
    let mut jpegs: Vec<Option<bytes::Bytes>> = vec![None; images.len()];
    for i in 0..shards * per_shard {
        let (path, label) = &images[i % images.len()];
        let jpeg = match &jpegs[i % images.len()] {
            Some(jpeg) => jpeg.clone(),
            None => {
                let jpeg = bytes::Bytes::from(std::fs::read(path)?);
                jpegs[i % images.len()] = Some(jpeg.clone());
                jpeg
            }
        };
        let sample = Sample::new(format!("s{i:06}"))
            .with("cls", label.to_string())
            .with("jpg", jpeg)
            .with("json", format!("{{\"i\": {i}, \"label\": {label}}}"));
        writer.write(&sample).await?;
    }
    let written = writer.finish().await?;
    let mut bytes = 0;
    for shard in written.iter().filter_map(|s| s.as_path()) {
        bytes += std::fs::metadata(shard)?.len();
    }
    Ok(bytes)
}

/// D4's shards, in order.
pub fn d4_files(dir: &std::path::Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let sub = dir.join("wds");
    let mut files: Vec<_> = std::fs::read_dir(&sub)
        .map_err(|e| {
            anyhow::anyhow!(
                "reading {}: {e} (generate the data with --generate)",
                sub.display()
            )
        })?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "tar"));
    files.sort();
    anyhow::ensure!(!files.is_empty(), "no shards in {}", sub.display());
    Ok(files)
}

/// W10 webdataset: D4's shards, 4 at once -> samples grouped by key, `cls` parsed ->
/// batch(64). With `decode` (W10d), each sample's JPEG is decoded, converted to float and
/// resized to 64x64 (W5's image work) in a parallel map over the cores. `shards` are paths or
/// URLs.
pub fn w10_dataset(shards: Vec<streamload::storage::Location>, decode: bool) -> Dataset<usize> {
    use streamload::format::WebDataset;
    let samples = WebDataset::new(shards).num_parallel_reads(tuned(4)).build();
    let batches = if decode {
        #[cfg(feature = "image")]
        {
            use streamload::image;
            samples
                .try_map_parallel(tuned(available_cores()), |sample| {
                    let img = image::convert_and_resize(&sample.image("jpg")?, 64, 64)?;
                    Ok((img, sample.cls()?))
                })
                .named("decode")
                .batch(64)
                .map(|batch| batch.len())
        }
        #[cfg(not(feature = "image"))]
        {
            return Dataset::from_vec(Vec::new());
        }
    } else {
        samples
            .try_map(|sample| Ok((sample.cls()?, sample)))
            .batch(64)
            .map(|batch| batch.len())
    };
    batches.with_options(options())
}

/// W10 / W10d: one epoch of [`w10_dataset`]; returns the samples.
pub async fn w10_read(
    workload: &str,
    shards: Vec<streamload::storage::Location>,
    decode: bool,
) -> anyhow::Result<u64> {
    let ds = w10_dataset(shards, decode);
    let mut epoch = ds.iter();
    let mut samples = 0u64;
    while let Some(batch) = epoch.next().await {
        samples += batch? as u64;
    }
    report(workload, &epoch);
    Ok(samples)
}

/// W10s: D4's shards (read from `dir`) as objects of the local S3 server (in memory, SigV4
/// checked, no added latency), registered as `s3://w10-bucket`. Returns their URLs and the
/// server (which lives as long as the runtime).
pub async fn w10s_setup(
    dir: &std::path::Path,
) -> anyhow::Result<(Vec<streamload::storage::Location>, s3::MemoryS3)> {
    let server = s3::MemoryS3::default();
    let mut urls = Vec::new();
    for path in d4_files(dir)? {
        let name = format!(
            "wds/{}",
            path.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("shard.tar")
        );
        server.insert("w10-bucket", &name, std::fs::read(&path)?.into());
        urls.push(streamload::storage::Location::parse(&format!(
            "s3://w10-bucket/{name}"
        )));
    }
    let addr = s3::memory_s3_server(server.clone(), "AKIDW10", "w10-secret-key").await;
    streamload::storage::register(
        "s3://w10-bucket",
        s3::s3_store(addr, "w10-bucket", "AKIDW10", "w10-secret-key"),
    )?;
    Ok((urls, server))
}

/// Rows per row group in D5.
#[cfg(feature = "parquet")]
pub const D5_ROW_GROUP: usize = 16_384;

/// D5 of WORKLOADS.md: D1's `shards` x `records` Examples (the same seeded draws, so the
/// same content) as columns `image` (binary), `label` (int64) and `weights` (fixed-size list
/// of 16 float32) in `dir/parquet/train.parquet`, row groups of 16,384 rows, snappy.
/// Written in Rust with the `parquet` crate's `ArrowWriter` (WORKLOADS.md says pyarrow; D1
/// is generated in Rust, so D5 is too; pyarrow's peers read it as any Parquet file).
/// Returns the file's size in bytes.
#[cfg(feature = "parquet")]
pub fn generate_d5(dir: &std::path::Path, shards: usize, records: usize) -> anyhow::Result<u64> {
    use std::sync::Arc;

    use parquet::basic::Compression;
    use parquet::file::properties::WriterProperties;
    use rand::{Rng, RngCore, SeedableRng};
    use streamload::format::parquet::RecordBatch;
    use streamload::format::parquet::arrow_array::ArrayRef;
    use streamload::format::parquet::arrow_array::builder::{
        BinaryBuilder, FixedSizeListBuilder, Float32Builder, Int64Builder,
    };

    let out = dir.join("parquet");
    std::fs::create_dir_all(&out)?;
    let path = out.join("train.parquet");
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(D5_ROW_GROUP))
        .build();
    let mut writer: Option<parquet::arrow::ArrowWriter<std::fs::File>> = None;
    let (mut image, mut label, mut weights) = (
        BinaryBuilder::new(),
        Int64Builder::new(),
        FixedSizeListBuilder::new(Float32Builder::new(), 16),
    );
    let flush = |image: &mut BinaryBuilder,
                 label: &mut Int64Builder,
                 weights: &mut FixedSizeListBuilder<Float32Builder>,
                 writer: &mut Option<parquet::arrow::ArrowWriter<std::fs::File>>|
     -> anyhow::Result<()> {
        let columns: [(&str, ArrayRef); 3] = [
            ("image", Arc::new(image.finish())),
            ("label", Arc::new(label.finish())),
            ("weights", Arc::new(weights.finish())),
        ];
        let batch = RecordBatch::try_from_iter(columns)?;
        if writer.is_none() {
            let file = std::fs::File::create(&path)?;
            *writer = Some(parquet::arrow::ArrowWriter::try_new(
                file,
                batch.schema(),
                Some(props.clone()),
            )?);
        }
        if let Some(w) = writer.as_mut() {
            w.write(&batch)?;
        }
        Ok(())
    };
    let mut rows = 0usize;
    let mut bytes = vec![0u8; 3000];
    for shard in 0..shards {
        // D1's draws, in D1's order: image length, image bytes, weights, label.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0xD1 ^ shard as u64);
        for _ in 0..records {
            let len = rng.random_range(1000..3000);
            rng.fill_bytes(&mut bytes[..len]);
            image.append_value(&bytes[..len]);
            for _ in 0..16 {
                weights.values().append_value(rng.random::<f32>());
            }
            weights.append(true);
            label.append_value(rng.random_range(0..1000));
            rows += 1;
            if rows % D5_ROW_GROUP == 0 {
                flush(&mut image, &mut label, &mut weights, &mut writer)?;
            }
        }
    }
    if rows % D5_ROW_GROUP != 0 || writer.is_none() {
        flush(&mut image, &mut label, &mut weights, &mut writer)?;
    }
    if let Some(w) = writer {
        w.close()?;
    }
    Ok(std::fs::metadata(&path)?.len())
}

/// D5's file under `dir`.
#[cfg(feature = "parquet")]
pub fn d5_file(dir: &std::path::Path) -> anyhow::Result<std::path::PathBuf> {
    let path = dir.join("parquet/train.parquet");
    anyhow::ensure!(
        path.exists(),
        "no {} (generate the data with --generate)",
        path.display()
    );
    Ok(path)
}

/// W11 parquet: D5 (a local path or a URL) -> project `label`, `weights` -> batches of 256
/// rows -> as tensors (int64 [256], float32 [256, 16]). Returns the rows.
#[cfg(feature = "parquet")]
pub async fn w11_parquet(file: String, workload: &str) -> anyhow::Result<u64> {
    use streamload::format::parquet::{ParquetDataset, column_tensor};
    let ds = ParquetDataset::new([file])
        .columns(["label", "weights"])
        .batch_size(256)
        .num_parallel_reads(tuned(available_cores()))
        .build()
        .try_map(|batch| {
            Ok((
                column_tensor(&batch, "label")?,
                column_tensor(&batch, "weights")?,
            ))
        })
        .with_options(options());
    let mut rows = 0u64;
    let mut epoch = ds.iter();
    while let Some(tensors) = epoch.next().await {
        let (label, weights) = tensors?;
        rows += label.shape()[0] as u64;
        black_box((label, weights));
    }
    report(workload, &epoch);
    Ok(rows)
}

/// W11s's bucket: D5's file on a local S3 server (s3s over objects in memory, SigV4
/// checked, no added latency), registered as `s3://w11-bucket`. Returns the server and the
/// file's URL.
#[cfg(feature = "parquet")]
pub async fn w11s_setup(file: &std::path::Path) -> anyhow::Result<(s3::MemoryS3, String)> {
    let server = s3::MemoryS3::default();
    server.insert(
        "w11-bucket",
        "parquet/train.parquet",
        std::fs::read(file)?.into(),
    );
    let addr = s3::memory_s3_server(server.clone(), "AKIDW11", "w11-secret-key").await;
    streamload::storage::register(
        "s3://w11-bucket",
        s3::s3_store(addr, "w11-bucket", "AKIDW11", "w11-secret-key"),
    )?;
    Ok((server, "s3://w11-bucket/parquet/train.parquet".to_string()))
}
