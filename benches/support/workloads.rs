//! The benchmark workloads of ../shared/WORKLOADS.md, defined once and used by both the
//! criterion benches (`benches/`) and `examples/workloads.rs`.
//!
//! Each workload is an async function that runs one full pass and returns what it counted, so
//! the caller can time it and turn it into the workload's figure.
#![allow(dead_code, unreachable_pub)] // each includer uses the workloads it measures; `pub` is for them

use std::hint::black_box;

use futures::StreamExt;
use streamload::{AUTOTUNE, Dataset};

/// W1 overhead: range -> map(x*2) -> filter(x % 3 == 0) -> batch(1024) -> prefetch(4).
/// Returns the number of elements that reach the consumer.
pub async fn w1_overhead(n: i64) -> anyhow::Result<u64> {
    let ds = Dataset::range(0, n)
        .map(|x| x * 2)
        .filter(|x| x % 3 == 0)
        .batch(1024)
        .prefetch(4);
    let mut epoch = ds.iter();
    let mut count = 0u64;
    while let Some(batch) = epoch.next().await {
        count += batch?.len() as u64;
    }
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
    Dataset::range(0, n)
        .map_parallel(parallelism, |x| Ok(cpu_work(x, HALF_MS)))
        .count()
        .await
}

/// W7a: a blocking generator that does ~0.2 ms of work per (x, y) element, consumed as-is.
pub async fn w7_generator(n: i64) -> anyhow::Result<u64> {
    Dataset::from_generator(16, move || (0..n).map(|i| (i, cpu_work(i, FIFTH_MS))))
        .count()
        .await
}

/// W7b: an index generator, with the ~0.2 ms of work moved into a parallel map.
pub async fn w7_index_generator_parallel_map(n: i64) -> anyhow::Result<u64> {
    Dataset::from_generator(16, move || 0..n)
        .map_parallel(AUTOTUNE, |i| Ok((i, cpu_work(i, FIFTH_MS))))
        .count()
        .await
}
