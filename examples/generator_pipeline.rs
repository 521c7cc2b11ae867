//! A slow user generator made parallel (W7 of WORKLOADS.md, on files).
//!
//! The generator a Python user writes for `tf.data.Dataset.from_generator` opens a file per
//! element and preprocesses it, one element after another on one thread. The fix tf.data's
//! guide gives, and the one here: generate only the cheap part (the index), and do the work
//! in a parallel map, on every core.
//!
//! ```text
//! cargo run --release --example generator_pipeline
//! ```
//!
//! The data: 2,000 small text files of 512 samples each, written to a temporary directory.
//! Preprocessing one (parse, standardise, a 96-bin power spectrum) costs about 0.2 ms of CPU.
//! Prints both rates, their ratio, and the per-stage report of the parallel version.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use futures::StreamExt;
use streamload::{AUTOTUNE, Dataset, Options, available_cores};

const FILES: usize = 2000;
const SAMPLES: usize = 512;
const BINS: usize = 96;

/// One training example: the file's label and its spectrum features.
struct Example {
    label: i64,
    features: Vec<f32>,
}

fn write_files(dir: &Path) -> anyhow::Result<()> {
    use std::fmt::Write;
    for i in 0..FILES {
        let mut text = format!("{}\n", i % 10);
        for t in 0..SAMPLES {
            let x = t as f64;
            let v = (x * 0.05 * (1 + i % 7) as f64).sin() + 0.3 * (x * 0.31).cos();
            write!(text, "{v:.5} ")?;
        }
        std::fs::write(dir.join(format!("{i:05}.txt")), text)?;
    }
    Ok(())
}

/// What the user's generator does for one element: open the file, parse it, standardise the
/// samples and compute a power spectrum (a plain DFT over the first `BINS` frequencies).
fn load_and_preprocess(dir: &Path, i: usize) -> anyhow::Result<Example> {
    let path = dir.join(format!("{i:05}.txt"));
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut lines = text.lines();
    let label = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .with_context(|| format!("{}: no label on line 1", path.display()))?;
    let samples = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::parse::<f32>)
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{}: a sample is not a number", path.display()))?;
    let n = samples.len().max(1) as f32;
    let mean = samples.iter().sum::<f32>() / n;
    let std = (samples.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n)
        .sqrt()
        .max(1e-6);
    let x: Vec<f32> = samples.iter().map(|v| (v - mean) / std).collect();
    let features = (0..BINS)
        .map(|k| {
            let w = std::f32::consts::TAU * k as f32 / n;
            let (step_sin, step_cos) = w.sin_cos();
            let (mut s, mut c, mut re, mut im) = (0f32, 1f32, 0f32, 0f32);
            for v in &x {
                re += v * c;
                im -= v * s;
                (s, c) = (s * step_cos + c * step_sin, c * step_cos - s * step_sin);
            }
            (re * re + im * im) / n
        })
        .collect();
    Ok(Example { label, features })
}

/// Runs one epoch, returning (elements, seconds, stage report).
async fn drain(ds: Dataset<Vec<Example>>) -> anyhow::Result<(usize, f64, String)> {
    let start = Instant::now();
    let mut epoch = ds.iter();
    let mut n = 0;
    let mut check = 0f64;
    while let Some(batch) = epoch.next().await {
        for ex in batch? {
            n += 1;
            check += ex.label as f64 + f64::from(ex.features[1]);
        }
    }
    std::hint::black_box(check);
    Ok((n, start.elapsed().as_secs_f64(), epoch.stats().to_string()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    write_files(tmp.path())?;
    let dir: Arc<PathBuf> = Arc::new(tmp.path().to_path_buf());
    let timing = Options::new().stats_timing(true);

    // (a) The slow generator as written: every element made on the generator's one thread.
    let d = Arc::clone(&dir);
    let slow = Dataset::try_from_generator(16, move || {
        let d = Arc::clone(&d);
        (0..FILES).map(move |i| load_and_preprocess(&d, i))
    })
    .batch(32)
    .prefetch(1)
    .with_options(timing.clone());

    // (b) The index generator plus a parallel map: the same elements, in the same order.
    let d = Arc::clone(&dir);
    let fast = Dataset::from_generator(16, || 0..FILES)
        .try_map_parallel(AUTOTUNE, move |i| load_and_preprocess(&d, i))
        .batch(32)
        .prefetch(1)
        .with_options(timing);

    let (na, sa, report_a) = drain(slow).await?;
    let (nb, sb, report_b) = drain(fast).await?;
    anyhow::ensure!(na == FILES && nb == FILES, "read {na} and {nb} of {FILES}");
    let (ra, rb) = (na as f64 / sa, nb as f64 / sb);
    println!(
        "(a) generator doing the work:        {ra:>8.0} elements/s ({:.3} ms each)",
        1e3 / ra
    );
    println!(
        "(b) index generator + map_parallel:  {rb:>8.0} elements/s on {} cores",
        available_cores()
    );
    println!("ratio (b)/(a): {:.2}x", rb / ra);
    println!("\n(a) stage report:\n{report_a}");
    println!("(b) stage report:\n{report_b}");
    Ok(())
}
