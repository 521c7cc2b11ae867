//! Runs the benchmark workloads of WORKLOADS.md (at the repository root) and prints one JSON
//! line per figure:
//! `{"system":"streamload","workload":"W1","figure":<number>,"unit":"<unit>","seconds":<s>}`.
//!
//! ```text
//! cargo run --release --example workloads -- --only W1,W4,W7
//! cargo run --release --example workloads -- --data DIR --only W3 --autotune --report
//! cargo run --release --example workloads -- --generate DIR --scale-down 16   # a smaller D1-D4
//! cargo run --release --example workloads --features parquet -- --data DIR --only W11,W11s
//! cargo run --release --example workloads --features hdf5 -- --data DIR --only W12
//! cargo run --release --example workloads --features zarr -- --data DIR --only W13
//! cargo run --release --example workloads --features tokenizers -- --data DIR --only W14
//! ```
//!
//! W2, W2gz, W3 (and W3's `no-parse` and `read` figures), W5, W5r and W5b repeat their pass
//! until at least 2 s and 3 passes have gone by (one pass takes 0.07-0.6 s on a fast host:
//! alone it is noise; the image workloads first run an untimed warm-up pass, as the peer
//! scripts do): `figure` is the median pass's rate, `seconds` that pass's time, and the line
//! adds `passes`, `min` and `max` (the spread of the passes' rates) and `total_seconds`.
//!
//! `--autotune` runs every parallelism and buffer of the workloads on `AUTOTUNE` (the JSON
//! lines keep their names); for W2, W2gz and W3 it alternates autotuned passes with passes at
//! WORKLOADS.md's settings in the same run and adds `<W>/fixed` (their figure) and
//! `<W>/autotune-vs-fixed` (the median of each pair's autotuned over fixed rate, with its
//! spread). `--report` prints each workload's stage report to stderr (each pass's, for the
//! repeated ones); `--ram-budget BYTES` sets `Options::ram_budget`; `--fixed N` sets every
//! parallelism and buffer to `N` (sweeps of hand-tuned settings to set `--autotune` beside).
//! `--scale-down K` divides the element counts by `K`, and with `--generate` the size of
//! every data set (D1's records per shard, D2's JPEGs, D3's lines, D4's samples per shard).
//!
//! The figures of one run can be set side by side (ratios within one run are what to compare
//! on a shared, noisy machine). Criterion versions of the same workloads are in `benches/`;
//! the figures measured so far, and how, are in BENCHMARKS.md.

#[path = "../benches/support/workloads.rs"]
mod workloads;

/// Allocation-heavy pipelines free on one thread what another allocated; mimalloc does that
/// without the lock contention of the system allocator (see `mimalloc` in ARCHITECTURE.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use streamload::available_cores;

#[derive(Parser, Debug)]
#[command(about = "streamload's benchmark workloads (defined in the repository's WORKLOADS.md)")]
struct Args {
    /// Directory with the workload data (D1-D4); not needed by W1, W4, W7 and W8.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Comma-separated workloads to run, e.g. `W1,W4,W7` (default: all available); with
    /// `--generate`, the data sets to write, e.g. `D2`.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Scale the element counts down by this factor (for quick smoke runs); with
    /// `--generate`, the data sets' sizes.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(i64).range(1..))]
    scale_down: i64,
    /// Write the workload data (D1, D2, D3, D4, D6; D5 with feature `parquet`) into this
    /// directory, then exit.
    #[arg(long)]
    generate: Option<PathBuf>,
    /// Run every parallelism and buffer of the workloads on AUTOTUNE (same JSON lines).
    #[arg(long)]
    autotune: bool,
    /// Time the stages and print each workload's stage report to stderr.
    #[arg(long)]
    report: bool,
    /// The pipelines' memory budget in bytes (`Options::ram_budget`; default: half the RAM).
    #[arg(long)]
    ram_budget: Option<u64>,
    /// Set every parallelism and buffer of the workloads to N (hand-tuning sweeps).
    #[arg(long, conflicts_with = "autotune")]
    fixed: Option<usize>,
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn emit(workload: &str, figure: f64, unit: &str, seconds: f64) {
    let line = serde_json::json!({
        "system": "streamload",
        "workload": workload,
        "figure": round3(figure),
        "unit": unit,
        "seconds": round3(seconds),
    });
    println!("{line}");
}

/// The CPU time this process has used so far, every thread's, user and system, in seconds.
fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` fills the `rusage` it is given; RUSAGE_SELF is always valid.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// The least time and the fewest passes a repeated figure is measured over.
const MIN_SECONDS: f64 = 2.0;
const MIN_PASSES: usize = 3;

/// The passes of one repeated figure: each pass's rate and seconds.
#[derive(Debug, Default)]
struct Passes {
    rates: Vec<f64>,
    seconds: Vec<f64>,
}

impl Passes {
    fn add(&mut self, rate: f64, seconds: f64) {
        self.rates.push(rate);
        self.seconds.push(seconds);
    }

    fn enough(&self) -> bool {
        self.rates.len() >= MIN_PASSES && self.seconds.iter().sum::<f64>() >= MIN_SECONDS
    }

    /// The index of the median rate's pass (the lower middle one of an even count).
    fn median_pass(&self) -> usize {
        let mut order: Vec<usize> = (0..self.rates.len()).collect();
        order.sort_by(|&a, &b| self.rates[a].total_cmp(&self.rates[b]));
        order[(order.len() - 1) / 2]
    }

    /// One JSON line: the median pass's rate and seconds, the spread of the rates.
    fn emit(&self, workload: &str, unit: &str) {
        let median = self.median_pass();
        let min = self.rates.iter().copied().fold(f64::INFINITY, f64::min);
        let max = self.rates.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let line = serde_json::json!({
            "system": "streamload",
            "workload": workload,
            "figure": round3(self.rates[median]),
            "unit": unit,
            "seconds": round3(self.seconds[median]),
            "passes": self.rates.len(),
            "min": round3(min),
            "max": round3(max),
            "total_seconds": round3(self.seconds.iter().sum()),
        });
        println!("{line}");
    }
}

/// Times passes of `pass` (each returns its work: records, or MB) until [`Passes::enough`].
/// With `versus_fixed`, passes alternate between every tunable on `AUTOTUNE` and
/// WORKLOADS.md's settings (the fixed pass first in each pair) until both have enough; the
/// second `Passes` are the fixed ones.
async fn repeated<F, Fut>(versus_fixed: bool, mut pass: F) -> anyhow::Result<(Passes, Passes)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<f64>>,
{
    let (mut tuned, mut fixed) = (Passes::default(), Passes::default());
    loop {
        if versus_fixed {
            workloads::set_autotune(false);
            let started = Instant::now();
            let work = pass().await;
            let s = started.elapsed().as_secs_f64();
            workloads::set_autotune(true);
            fixed.add(work? / s, s);
        }
        let started = Instant::now();
        let work = pass().await?;
        let s = started.elapsed().as_secs_f64();
        tuned.add(work / s, s);
        if tuned.enough() && (!versus_fixed || fixed.enough()) {
            return Ok((tuned, fixed));
        }
    }
}

/// Emits a repeated figure; under `--autotune` also its fixed passes and the ratio of each
/// autotuned pass to the fixed pass before it.
fn emit_repeated(workload: &str, unit: &str, (tuned, fixed): &(Passes, Passes)) {
    tuned.emit(workload, unit);
    if fixed.rates.is_empty() {
        return;
    }
    fixed.emit(&format!("{workload}/fixed"), unit);
    let mut ratios = Passes::default();
    for i in 0..tuned.rates.len().min(fixed.rates.len()) {
        ratios.add(
            tuned.rates[i] / fixed.rates[i],
            tuned.seconds[i] + fixed.seconds[i],
        );
    }
    ratios.emit(
        &format!("{workload}/autotune-vs-fixed"),
        "x (autotuned pass over the fixed pass before it)",
    );
}

/// The bytes of each file of `items`.
#[cfg(feature = "image")]
fn read_files(items: &[(PathBuf, i64)]) -> anyhow::Result<Vec<Vec<u8>>> {
    Ok(items
        .iter()
        .map(|(path, _)| std::fs::read(path))
        .collect::<Result<_, _>>()?)
}

/// An image workload's figure: one untimed warm-up pass of `pass` over `items` (as the peer
/// scripts have), then repeated passes, emitted as `workload` in images/s.
#[cfg(feature = "image")]
async fn image_passes<F, Fut>(
    workload: &str,
    items: &[(PathBuf, i64)],
    pass: F,
) -> anyhow::Result<()>
where
    F: Fn(Vec<(PathBuf, i64)>) -> Fut + Sync,
    Fut: std::future::Future<Output = anyhow::Result<u64>> + Send,
{
    pass(items.to_vec()).await?;
    let passes = repeated(false, || async { Ok(pass(items.to_vec()).await? as f64) }).await?;
    emit_repeated(workload, "images/s", &passes);
    Ok(())
}

/// The one-core decode rates of `jpegs` (full, crop, 1/2, 1/4) as `<workload>/decode1-<name>`.
#[cfg(feature = "image")]
fn emit_decode_rates(workload: &str, data: &str, jpegs: &[Vec<u8>]) -> anyhow::Result<()> {
    for (name, rate) in workloads::decode_rates_one_core(jpegs)? {
        emit(
            &format!("{workload}/decode1-{name}"),
            rate,
            &format!("images/s ({data} decode only, one core)"),
            jpegs.len() as f64 / rate,
        );
    }
    Ok(())
}

/// Reads `paths` once, untimed, so the timed run reads from the page cache as the workloads
/// say (this host's DAMON reclaim evicts files left idle for a while; tf.data's scripts warm
/// up the same way, with a first untimed pass).
fn warm_page_cache<P: AsRef<std::path::Path>>(paths: &[P]) -> anyhow::Result<()> {
    use std::io::Read;
    let mut buf = vec![0u8; 1 << 20];
    for path in paths {
        let mut file = std::fs::File::open(path)?;
        while file.read(&mut buf)? > 0 {}
    }
    Ok(())
}

async fn timed<F: std::future::Future<Output = anyhow::Result<u64>>>(
    f: F,
) -> anyhow::Result<(u64, f64)> {
    let start = Instant::now();
    let n = f.await?;
    Ok((n, start.elapsed().as_secs_f64()))
}

/// W12: slices of 64 rows of D7's `/scenes/points` with the same rows of `/scenes/labels`,
/// every value summed; the rows read.
#[cfg(feature = "hdf5")]
async fn w12_hdf5(files: Vec<PathBuf>, parallel: Option<usize>) -> anyhow::Result<u64> {
    use futures::StreamExt as _;
    use streamload::format::hdf5::Hdf5Dataset;
    let ds = Hdf5Dataset::new(files, "/scenes/points")
        .with_labels("/scenes/labels")
        .slices(64);
    let ds = match parallel {
        Some(n) => ds.num_parallel_reads(n),
        None => ds,
    };
    let sums = ds.build_labeled::<f32, i64>().map(|(points, labels)| {
        let sum = f64::from(points.sum()) + labels.iter().map(|&l| l as f64).sum::<f64>();
        (points.shape()[0] as u64, sum)
    });
    let mut epoch = sums.iter();
    let (mut rows, mut total) = (0u64, 0f64);
    while let Some(item) = epoch.next().await {
        let (n, sum) = item?;
        rows += n;
        total += sum;
    }
    anyhow::ensure!(total.is_finite(), "W12: a sum that is not finite");
    Ok(rows)
}

/// W13: chunk-aligned slices of 64 rows of D8's `points`, every value summed; the rows read.
#[cfg(feature = "zarr")]
async fn w13_zarr(store: PathBuf, parallel: Option<usize>) -> anyhow::Result<u64> {
    use futures::StreamExt as _;
    use streamload::format::zarr::ZarrDataset;
    let ds = ZarrDataset::new([store], "points").slices(64);
    let ds = match parallel {
        Some(n) => ds.num_parallel_reads(n),
        None => ds,
    };
    let sums = ds
        .build::<f32>()
        .map(|slice| (slice.shape()[0] as u64, slice.sum()));
    let mut epoch = sums.iter();
    let (mut rows, mut total) = (0u64, 0f64);
    while let Some(item) = epoch.next().await {
        let (n, sum) = item?;
        rows += n;
        total += f64::from(sum);
    }
    anyhow::ensure!(total.is_finite(), "W13: a sum that is not finite");
    Ok(rows)
}

/// W14: D9's documents tokenized (the end id appended), concatenated and split into
/// sequences of 2,048 tokens, batched by 8 as `int32` arrays (the last partial batch
/// dropped); the tokens of the batches, and the sum of their ids.
#[cfg(feature = "tokenizers")]
async fn w14_tokens(dir: &std::path::Path) -> anyhow::Result<(u64, u64)> {
    use futures::StreamExt as _;
    use streamload::format::JsonLinesDataset;
    use streamload::ndarray::Array2;
    use streamload::text::{Packing, Tokenizer};

    #[derive(serde::Deserialize)]
    struct Document {
        text: String,
    }
    let tokenizer =
        Tokenizer::from_file(dir.join("tokens/tokenizer.json"))?.end_token("<|endoftext|>")?;
    let batches = JsonLinesDataset::new([dir.join("tokens/docs.jsonl")])
        .build_as::<Document>()
        .try_map_parallel(streamload::AUTOTUNE, move |doc| tokenizer.encode(&doc.text))
        .pack(2048, Packing::ConcatThenSplit)
        .batch_drop_remainder(8)
        .map(|rows| {
            let ids = rows.iter().flat_map(|r| r.tokens.iter().map(|&t| t as i32));
            Array2::from_shape_vec((rows.len(), 2048), ids.collect())
        })
        .prefetch(2);
    let mut epoch = batches.iter();
    let (mut tokens, mut sum) = (0u64, 0u64);
    while let Some(batch) = epoch.next().await {
        let batch = batch??;
        tokens += batch.len() as u64;
        sum += batch.iter().map(|&t| t as u64).sum::<u64>();
    }
    Ok((tokens, sum))
}

/// W14m: W14's pipeline over D9's 40 parts, read by one source in turn or by 40 sources
/// mixed with equal weights (`sources`: 1 or 40), until `batches` batches; the process's
/// peak resident memory (bytes) and the most threads seen.
#[cfg(feature = "tokenizers")]
async fn w14_mixture(
    dir: &std::path::Path,
    sources: usize,
    batches: usize,
) -> anyhow::Result<(u64, u64)> {
    use futures::StreamExt as _;
    use streamload::format::JsonLinesDataset;
    use streamload::text::{Packing, Tokenizer};
    use streamload::{Dataset, Mixture};

    #[derive(serde::Deserialize)]
    struct Document {
        text: String,
    }
    let status = |field: &str| -> u64 {
        let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
            .unwrap_or(0)
    };
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let done = std::sync::Arc::clone(&done);
        std::thread::spawn(move || {
            let mut most = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                most = most.max(status("Threads:"));
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            most
        })
    };
    let tokenizer = std::sync::Arc::new(
        Tokenizer::from_file(dir.join("tokens/tokenizer.json"))?.end_token("<|endoftext|>")?,
    );
    // D9 in the 40 parts `scripts/make_d9.py` writes beside it: one source reads them all in
    // turn, or each part is a source.
    let parts: Vec<_> = (0..40)
        .map(|k| dir.join(format!("tokens/parts/part-{k:02}.jsonl")))
        .collect();
    let inputs: Vec<Dataset<Document>> = if sources == 1 {
        vec![JsonLinesDataset::new(parts).build_as::<Document>()]
    } else {
        parts
            .iter()
            .map(|part| JsonLinesDataset::new([part]).build_as::<Document>())
            .collect()
    };
    let mixed = Dataset::mix(inputs, Mixture::constant(vec![1.0; sources]), Some(14))
        .try_map_parallel(streamload::AUTOTUNE, move |doc| tokenizer.encode(&doc.text))
        .pack(2048, Packing::ConcatThenSplit)
        .batch_drop_remainder(8)
        .prefetch(2);
    let mut epoch = mixed.iter();
    for _ in 0..batches {
        epoch
            .next()
            .await
            .ok_or_else(|| anyhow::anyhow!("W14m: the data ended"))??;
    }
    drop(epoch);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let threads = sampler
        .join()
        .map_err(|_| anyhow::anyhow!("W14m: the sampler panicked"))?;
    Ok((status("VmHWM:") * 1024, threads))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let wanted =
        |w: &str| args.only.is_empty() || args.only.iter().any(|o| o.eq_ignore_ascii_case(w));
    if let Some(dir) = &args.generate {
        // `--only D2` (say) writes just that data set; `--scale-down K` makes each K times
        // smaller.
        let start = Instant::now();
        let scale = usize::try_from(args.scale_down)?;
        let mut wrote = Vec::new();
        if wanted("D1") {
            let records = workloads::scaled(workloads::D1_RECORDS, scale);
            let bytes = workloads::generate_d1(dir, workloads::D1_SHARDS, records).await?;
            wrote.push(format!(
                "D1 ({} shards of {records} records, {:.1} MB of payload, plain and gzip)",
                workloads::D1_SHARDS,
                bytes as f64 / 1e6
            ));
        }
        #[cfg(feature = "image")]
        if wanted("D2") {
            let images = workloads::scaled(workloads::D2_IMAGES, scale);
            let jpegs = workloads::generate_d2(dir, images).await?;
            wrote.push(format!("D2 ({images} JPEGs, {:.1} MB)", jpegs as f64 / 1e6));
        }
        #[cfg(feature = "image")]
        if wanted("D6") {
            let images = workloads::scaled(workloads::D6_IMAGES, scale);
            let jpegs = workloads::generate_d6(dir, images).await?;
            wrote.push(format!("D6 ({images} JPEGs, {:.1} MB)", jpegs as f64 / 1e6));
        }
        if wanted("D3") {
            let lines = workloads::scaled(workloads::D3_LINES, scale);
            let text = workloads::generate_d3(dir, lines)?;
            wrote.push(format!(
                "D3 ({lines} lines, {:.1} MB of text)",
                text as f64 / 1e6
            ));
        }
        #[cfg(feature = "parquet")]
        if wanted("D5") {
            let records = workloads::scaled(workloads::D1_RECORDS, scale);
            let bytes = workloads::generate_d5(dir, workloads::D1_SHARDS, records)?;
            wrote.push(format!(
                "D5 ({} rows of D1 in row groups of {}, {:.1} MB of Parquet)",
                workloads::D1_SHARDS * records,
                workloads::D5_ROW_GROUP,
                bytes as f64 / 1e6
            ));
        }
        if wanted("D4") {
            // From D2's JPEGs (generate D2 first, or with it).
            let per = workloads::scaled(workloads::D4_SAMPLES, scale);
            let bytes = workloads::generate_d4(dir, workloads::D4_SHARDS, per).await?;
            wrote.push(format!(
                "D4 ({} WebDataset shards of {per} samples, {:.1} MB, by ShardWriter)",
                workloads::D4_SHARDS,
                bytes as f64 / 1e6
            ));
        }
        eprintln!(
            "wrote {} to {} in {:.1} s",
            wrote.join(", "),
            dir.display(),
            start.elapsed().as_secs_f64()
        );
        return Ok(());
    }
    workloads::set_mode(args.autotune, args.report, args.ram_budget);
    workloads::set_fixed(args.fixed);

    if wanted("W1") {
        let n = 10_000_000 / args.scale_down;
        let (_, s) = timed(workloads::w1_overhead(n)).await?;
        emit("W1", n as f64 / s, "elements/s", s);
    }
    if wanted("W4") {
        let n = 20_000 / args.scale_down;
        let cores = available_cores();
        let (_, s1) = timed(workloads::w4_cpu_map(n, 1)).await?;
        let (_, sp) = timed(workloads::w4_cpu_map(n, cores)).await?;
        emit("W4/p1", n as f64 / s1, "elements/s", s1);
        emit(&format!("W4/p{cores}"), n as f64 / sp, "elements/s", sp);
        emit("W4", s1 / sp, "speedup", s1 + sp);
    }
    if wanted("W7") {
        let n = 10_000 / args.scale_down;
        let (_, sa) = timed(workloads::w7_generator(n)).await?;
        let (_, sb) = timed(workloads::w7_index_generator_parallel_map(n)).await?;
        emit("W7a", n as f64 / sa, "elements/s", sa);
        emit("W7b", n as f64 / sb, "elements/s", sb);
        emit("W7", sa / sb, "ratio", sa + sb);
    }
    if wanted("W6") {
        match &args.data {
            None => eprintln!("W6: skipped (needs --data DIR; make it with --generate DIR)"),
            Some(dir) => {
                warm_page_cache(&[dir.join("text/lines.txt")])?;
                let (lines, s) = timed(workloads::w6_text(dir.join("text/lines.txt"))).await?;
                emit("W6", lines as f64 / s, "lines/s", s);
            }
        }
    }
    #[cfg(feature = "image")]
    if wanted("W5") {
        match &args.data {
            None => eprintln!("W5: skipped (needs --data DIR; make it with --generate DIR)"),
            Some(dir) => {
                let items = workloads::d2_files(dir)?;
                let jpegs = read_files(&items)?;
                let (n, s) = timed(async { workloads::w5_decode_one_core(&jpegs) }).await?;
                emit(
                    "W5/decode1",
                    n as f64 / s,
                    "images/s (decode only, one core)",
                    s,
                );
                let (n, s) = timed(async { workloads::w5_decode_resize_one_core(&jpegs) }).await?;
                emit(
                    "W5/decode_resize1",
                    n as f64 / s,
                    "images/s (decode+resize, one core)",
                    s,
                );
                image_passes("W5", &items, workloads::w5_image).await?;
            }
        }
    }
    #[cfg(feature = "image")]
    if wanted("W5r") {
        match &args.data {
            None => eprintln!("W5r: skipped (needs --data DIR; make it with --generate DIR)"),
            Some(dir) => {
                let items = workloads::d2_files(dir)?;
                let items = items[..items.len() / args.scale_down as usize].to_vec();
                let jpegs = read_files(&items)?;
                emit_decode_rates("W5r", "D2", &jpegs)?;
                image_passes("W5r", &items, workloads::w5r_image).await?;
            }
        }
    }
    #[cfg(feature = "image")]
    if wanted("W5b") {
        match &args.data {
            None => eprintln!("W5b: skipped (needs --data DIR; make it with --generate DIR)"),
            Some(dir) => match workloads::d6_files(dir) {
                Err(e) => eprintln!("W5b: skipped ({e})"),
                Ok(items) => {
                    let items = items[..items.len() / args.scale_down as usize].to_vec();
                    let jpegs = read_files(&items)?;
                    emit_decode_rates("W5b", "D6", &jpegs)?;
                    image_passes("W5b", &items, workloads::w5b_image).await?;
                }
            },
        }
    }
    if wanted("W3") {
        match &args.data {
            None => eprintln!("W3: skipped (needs --data DIR; make it with --generate DIR)"),
            Some(dir) => {
                let files = workloads::d1_files(dir, false)?;
                warm_page_cache(&files)?;
                let records = std::cell::Cell::new(0u64);
                let cpu = cpu_seconds();
                let passes = repeated(args.autotune, || async {
                    let n = workloads::w3_tfrecord_parse(files.clone()).await?;
                    records.set(records.get() + n);
                    Ok(n as f64)
                })
                .await?;
                emit_repeated("W3", "records/s", &passes);
                // The CPU time (every thread's, user and system) per record: less sensitive
                // to other processes on a shared machine than the rate.
                emit(
                    "W3/cpu-per-record",
                    (cpu_seconds() - cpu) / records.get().max(1) as f64 * 1e6,
                    "microseconds",
                    0.0,
                );
                // What W3's parse costs: the same pipeline without it, and the read alone.
                let passes = repeated(false, || async {
                    Ok(workloads::w3_no_parse(files.clone()).await? as f64)
                })
                .await?;
                emit_repeated("W3/no-parse", "records/s", &passes);
                let passes = repeated(false, || async {
                    Ok(workloads::w3_read(files.clone()).await? as f64)
                })
                .await?;
                emit_repeated("W3/read", "records/s", &passes);
            }
        }
    }
    if wanted("W9") {
        match &args.data {
            None => eprintln!("W9: skipped (needs --data DIR; make it with --generate DIR)"),
            Some(dir) => {
                let files = workloads::d1_files(dir, false)?;
                warm_page_cache(&files)?;
                // W3 (deterministic) with a checkpoint every 1,000 batches (about one per two
                // epochs) over without: passes alternate, the median of the pairs' ratios.
                let ds = workloads::w3_dataset(files.clone(), true)?;
                let (mut with, mut without, mut ratios) =
                    (Passes::default(), Passes::default(), Passes::default());
                let (mut batches, mut taken, mut half) = (0u64, 0u64, 0usize);
                while !(with.enough() && without.enough()) {
                    let started = Instant::now();
                    let (n, _) = workloads::w9_pass(&ds, None, &mut 0).await?;
                    half = (n as usize).div_ceil(256) / 2;
                    let a = started.elapsed().as_secs_f64();
                    without.add(n as f64 / a, a);
                    let started = Instant::now();
                    let (n, t) = workloads::w9_pass(&ds, Some(1_000), &mut batches).await?;
                    let b = started.elapsed().as_secs_f64();
                    taken += t;
                    with.add(n as f64 / b, b);
                    ratios.add(a / b, a + b);
                }
                // The state mid-epoch (half way: 256 of D1's 512 batches), the time to take it, and
                // from `iter_from` to the first batch: medians of 5.
                let mut runs = Vec::new();
                for _ in 0..5 {
                    runs.push(workloads::w9_resume(files.clone(), half).await?);
                }
                let median = |f: fn(&(usize, f64, f64)) -> f64| {
                    let mut v: Vec<f64> = runs.iter().map(f).collect();
                    v.sort_by(f64::total_cmp);
                    v[v.len() / 2]
                };
                emit("W9/state-bytes", median(|r| r.0 as f64), "bytes", 0.0);
                emit(
                    "W9/checkpoint-ms",
                    median(|r| r.1 * 1e3),
                    "ms",
                    median(|r| r.1),
                );
                emit("W9/resume-ms", median(|r| r.2 * 1e3), "ms", median(|r| r.2));
                // The same resume with the files on the in-process S3 server (ranged GETs
                // from the saved offsets).
                let urls = workloads::w9_s3_setup(&files).await?;
                let mut runs = Vec::new();
                for _ in 0..5 {
                    runs.push(workloads::w9_resume(urls.clone(), half).await?);
                }
                let mut v: Vec<f64> = runs.iter().map(|r| r.2).collect();
                v.sort_by(f64::total_cmp);
                emit("W9s/resume-ms", v[v.len() / 2] * 1e3, "ms", v[v.len() / 2]);
                without.emit("W9/deterministic", "records/s");
                with.emit("W9/with-checkpoints", "records/s");
                ratios.emit(
                    "W9/overhead",
                    &format!("x (throughput with a checkpoint every 1,000 batches over without; {taken} taken)"),
                );
            }
        }
    }
    if wanted("W8") {
        let bucket = workloads::w8_setup(std::time::Duration::from_millis(50)).await?;
        let mut rates = Vec::new();
        // `W8/cN`: exactly N shards open (the workload); `W8-ahead/cN`: N more opened ahead.
        // Each the median of three passes (c16's pass is ~0.2 s: one alone is noisy).
        for (label, ahead) in [("W8", false), ("W8-ahead", true)] {
            for cycle in [1, 4, 8, 16] {
                let mut passes = Vec::new();
                for _ in 0..3 {
                    let start = Instant::now();
                    let bytes = workloads::w8_read(&bucket.files, cycle, ahead).await?;
                    passes.push(start.elapsed().as_secs_f64());
                    anyhow::ensure!(
                        bytes == bucket.bytes,
                        "{label}/c{cycle}: read {bytes} of {} bytes",
                        bucket.bytes
                    );
                }
                passes.sort_by(f64::total_cmp);
                let s = passes[1];
                let rate = bucket.bytes as f64 / 1e6 / s;
                emit(&format!("{label}/c{cycle}"), rate, "MB/s", s);
                rates.push(rate);
            }
        }
        let (c1, c16) = (rates[0], rates[3]);
        emit("W8", c16 / c1, "x (cycle 16 over cycle 1)", 0.0);
    }
    // W12: D7's 8 files (`scripts/make_d7.py DIR` writes them), slices of 64 rows (one chunk
    // each) with their labels, every value summed; W12/p1 and W12/p4: 1 and 4 slices read at
    // a time (AUTOTUNE: the cores). `W12/mbs`: MB/s of points (12,288 bytes a row).
    #[cfg(feature = "hdf5")]
    for (name, parallel) in [("W12", None), ("W12/p1", Some(1)), ("W12/p4", Some(4))] {
        if !wanted(name.split('/').next().unwrap_or(name)) {
            continue;
        }
        let Some(dir) = &args.data else {
            eprintln!("{name}: skipped (needs --data DIR; make it with scripts/make_d7.py DIR)");
            continue;
        };
        let files: Vec<PathBuf> = (0..8)
            .map(|k| dir.join(format!("hdf5/scenes-{k:02}.h5")))
            .collect();
        warm_page_cache(&files)?;
        let passes = repeated(args.autotune, || {
            let files = files.clone();
            async move { Ok(w12_hdf5(files, parallel).await? as f64) }
        })
        .await?;
        emit_repeated(name, "rows/s", &passes);
        if name == "W12" {
            let tuned = &passes.0;
            let median = tuned.median_pass();
            let mbs = tuned.rates[median] * 12_288.0 / 1e6;
            emit("W12/mbs", mbs, "MB/s", tuned.seconds[median]);
        }
    }
    // W13: D8's points (`scripts/make_d8.py DIR` writes them), chunk-aligned slices of 64 rows
    // (one inner chunk of a shard each), every value summed; W13/p1 and W13/p4: 1 and 4
    // slices read at a time (AUTOTUNE: the cores).
    #[cfg(feature = "zarr")]
    for (name, parallel) in [("W13", None), ("W13/p1", Some(1)), ("W13/p4", Some(4))] {
        if !wanted(name.split('/').next().unwrap_or(name)) {
            continue;
        }
        let Some(dir) = &args.data else {
            eprintln!("{name}: skipped (needs --data DIR; make it with scripts/make_d8.py DIR)");
            continue;
        };
        let store = dir.join("zarr/scenes.zarr");
        let shards: Vec<PathBuf> = std::fs::read_dir(store.join("points/c"))?
            .map(|e| e.map(|e| e.path().join("0/0")))
            .collect::<Result<_, _>>()?;
        warm_page_cache(&shards)?;
        let passes = repeated(args.autotune, || {
            let store = store.clone();
            async move { Ok(w13_zarr(store, parallel).await? as f64) }
        })
        .await?;
        emit_repeated(name, "rows/s", &passes);
    }
    // W14: D9 (`scripts/make_d9.py DIR` writes it) tokenized and packed; one pass (about a
    // minute), its tokens per second, the id sum printed to stderr as the check.
    #[cfg(feature = "tokenizers")]
    if wanted("W14") {
        match &args.data {
            None => {
                eprintln!("W14: skipped (needs --data DIR; make it with scripts/make_d9.py DIR)")
            }
            Some(dir) => {
                warm_page_cache(&[dir.join("tokens/docs.jsonl")])?;
                let start = Instant::now();
                let (tokens, sum) = w14_tokens(dir).await?;
                let s = start.elapsed().as_secs_f64();
                eprintln!("W14: {tokens} tokens in batches, ids summing to {sum}");
                emit("W14", tokens as f64 / s, "tokens/s", s);
            }
        }
    }
    // W14m1 and W14m40: W14's pipeline over 1 and 40 sources mixed (each a reader of D9 and a
    // parallel tokenizer), 300 batches; the peak resident memory and threads of the process.
    // Run each in a process of its own: the peak is the process's.
    #[cfg(feature = "tokenizers")]
    for (name, sources) in [("W14m1", 1), ("W14m40", 40)] {
        if !args.only.iter().any(|o| o.eq_ignore_ascii_case(name)) {
            continue;
        }
        let Some(dir) = &args.data else {
            eprintln!("{name}: skipped (needs --data DIR; make it with scripts/make_d9.py DIR)");
            continue;
        };
        let start = Instant::now();
        let (peak, threads) = w14_mixture(dir, sources, 300).await?;
        let s = start.elapsed().as_secs_f64();
        emit(
            &format!("{name}/rss"),
            peak as f64 / 1e6,
            "MB peak resident",
            s,
        );
        emit(
            &format!("{name}/threads"),
            threads as f64,
            "threads at most",
            s,
        );
    }
    #[cfg(feature = "parquet")]
    for (name, remote) in [("W11", false), ("W11s", true)] {
        if !wanted(name) {
            continue;
        }
        let Some(dir) = &args.data else {
            eprintln!("{name}: skipped (needs --data DIR; make it with --generate DIR)");
            continue;
        };
        let path = workloads::d5_file(dir)?;
        // W11s: the file on the in-process S3 server (kept alive for the passes).
        let (_server, file) = if remote {
            let (server, url) = workloads::w11s_setup(&path).await?;
            (Some(server), url)
        } else {
            warm_page_cache(&[&path])?;
            (None, path.display().to_string())
        };
        let passes = repeated(args.autotune, || async {
            Ok(workloads::w11_parquet(file.clone(), name).await? as f64)
        })
        .await?;
        emit_repeated(name, "rows/s", &passes);
    }
    // W10 (local), W10s (the local S3 server), W10d (W10 + JPEG decode and resize).
    let mut w10_bucket = None;
    for (name, remote, decode) in [
        ("W10", false, false),
        ("W10s", true, false),
        ("W10d", false, true),
    ] {
        if !wanted(name) {
            continue;
        }
        let Some(dir) = &args.data else {
            eprintln!("{name}: skipped (needs --data DIR; make it with --generate DIR)");
            continue;
        };
        if decode && cfg!(not(feature = "image")) {
            eprintln!("{name}: skipped (needs the image feature)");
            continue;
        }
        let shards = if remote {
            let (urls, server) = workloads::w10s_setup(dir).await?;
            w10_bucket = Some(server);
            urls
        } else {
            let files = workloads::d4_files(dir)?;
            warm_page_cache(&files)?;
            files.into_iter().map(Into::into).collect()
        };
        if decode {
            let (n, s) = timed(workloads::w10_read(name, shards, true)).await?;
            emit(name, n as f64 / s, "samples/s", s);
        } else {
            let passes = repeated(args.autotune, || async {
                Ok(workloads::w10_read(name, shards.clone(), false).await? as f64)
            })
            .await?;
            emit_repeated(name, "samples/s", &passes);
        }
    }
    drop(w10_bucket);
    for (name, gz) in [("W2", false), ("W2gz", true)] {
        if !wanted(name) {
            continue;
        }
        let Some(dir) = &args.data else {
            eprintln!("{name}: skipped (needs --data DIR; make it with --generate DIR)");
            continue;
        };
        let files = workloads::d1_files(dir, gz)?;
        warm_page_cache(&files)?;
        let passes = repeated(args.autotune, || async {
            let (_, bytes) = workloads::w2_tfrecord_raw(files.clone(), gz).await?;
            Ok(bytes as f64 / 1e6)
        })
        .await?;
        emit_repeated(name, "MB/s", &passes);
    }
    Ok(())
}
