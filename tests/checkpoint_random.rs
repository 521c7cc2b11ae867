//! Checkpoint exactness over random pipelines: random sources and chains of resumable
//! operations, random parallelism, prefetch depths and AUTOTUNE, and runs interrupted at
//! random points several times (each resume checkpointed and resumed again), each compared
//! with the uninterrupted epoch.

use futures::StreamExt;
use streamload::rand::rngs::StdRng;
use streamload::rand::{Rng, SeedableRng};
use streamload::{AUTOTUNE, Checkpoint, Dataset, Parallelism};

/// A recipe description, so the same pipeline can be built again (as a new process would).
#[derive(Debug, Clone)]
enum Op {
    Map(i64),
    Filter(i64),
    Take(i64),
    Skip(i64),
    Enumerate,
    Shuffle(usize, u64),
    BatchSum(usize, bool),
    Prefetch(Option<usize>),
    MapParallel(Option<usize>),
    RandomMap(usize, Option<u64>),
    Repeat(u64),
    Interleave(usize, usize),
    ParallelInterleave(usize, usize),
}

#[derive(Debug, Clone)]
struct Recipe {
    source: (i64, bool),
    ops: Vec<Op>,
}

fn parallelism(p: Option<usize>) -> Parallelism {
    p.map_or(AUTOTUNE, Parallelism::Fixed)
}

fn build(recipe: &Recipe) -> Dataset<i64> {
    let (n, from_vec) = recipe.source;
    let mut ds = if from_vec {
        Dataset::from_vec((0..n).map(|x| x * 10).collect())
    } else {
        Dataset::range(0, n)
    };
    for op in &recipe.ops {
        ds = match *op {
            Op::Map(k) => ds.map(move |x| x * 3 + k),
            Op::Filter(k) => ds.filter(move |x| x.rem_euclid(k) != 0),
            Op::Take(k) => ds.take(k),
            Op::Skip(k) => ds.skip(k),
            Op::Enumerate => ds.enumerate(100).map(|(i, x)| i * 1_000_000 + x),
            Op::Shuffle(b, seed) => ds.shuffle(b, Some(seed)),
            Op::BatchSum(b, drop) => {
                let batched = if drop {
                    ds.batch_drop_remainder(b)
                } else {
                    ds.batch(b)
                };
                batched.map(|v| v.iter().sum::<i64>() * 7 + v.len() as i64)
            }
            Op::Prefetch(p) => ds.prefetch(parallelism(p)),
            Op::MapParallel(p) => ds.map_parallel(parallelism(p), |x| x ^ 0x55),
            Op::RandomMap(p, seed) => {
                ds.random_map(p, seed, |x, rng| x * 1_000 + rng.random_range(0..1_000))
            }
            Op::Repeat(k) => ds.repeat_n(k),
            Op::Interleave(cycle, block) => ds.interleave(cycle, block, |x| {
                Dataset::range(0, x.rem_euclid(5)).map(move |y| x * 10 + y)
            }),
            Op::ParallelInterleave(cycle, block) => {
                ds.parallel_interleave(cycle, block, cycle, |x| {
                    Dataset::range(0, x.rem_euclid(4) + 1).map(move |y| x * 10 + y)
                })
            }
        };
    }
    // Unseeded random stages take a seed from OS entropy per recipe: each recipe built here
    // stands for another process, so they derive theirs from the pipeline's global seed
    // (tests/checkpoint.rs resumes entropy-seeded stages within one recipe).
    ds.with_options(streamload::Options::new().seed(0x0123_4567))
}

fn random_recipe(rng: &mut StdRng) -> Recipe {
    let source = (rng.random_range(0..400), rng.random_bool(0.3));
    let mut ops = Vec::new();
    for _ in 0..rng.random_range(1..6) {
        let p = || None;
        let fixed = |rng: &mut StdRng| {
            if rng.random_bool(0.3) {
                p()
            } else {
                Some(rng.random_range(1..4))
            }
        };
        let op = match rng.random_range(0..13) {
            0 => Op::Map(rng.random_range(0..9)),
            1 => Op::Filter(rng.random_range(2..5)),
            2 => Op::Take(rng.random_range(10..500)),
            3 => Op::Skip(rng.random_range(0..20)),
            4 => Op::Enumerate,
            5 => Op::Shuffle(rng.random_range(1..80), rng.random()),
            6 => Op::BatchSum(rng.random_range(1..9), rng.random_bool(0.3)),
            7 => Op::Prefetch(fixed(rng)),
            8 => Op::MapParallel(fixed(rng)),
            9 => Op::RandomMap(
                rng.random_range(1..4),
                rng.random_bool(0.7).then(|| rng.random()),
            ),
            10 => Op::Repeat(rng.random_range(1..3)),
            11 => Op::Interleave(rng.random_range(1..4), rng.random_range(1..3)),
            _ => Op::ParallelInterleave(rng.random_range(1..4), rng.random_range(1..3)),
        };
        ops.push(op);
    }
    Recipe { source, ops }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_pipelines_resume_exactly_at_random_points() {
    let seed = std::env::var("STREAMLOAD_CHECKPOINT_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0x5EED_C0DE);
    let mut rng = StdRng::seed_from_u64(seed);
    // More cases with STREAMLOAD_CHECKPOINT_CASES (CI runs 100, about a second).
    let cases = std::env::var("STREAMLOAD_CHECKPOINT_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100);
    for case in 0..cases {
        let recipe = random_recipe(&mut rng);
        let start = || build(&recipe).iter();
        let mut full = Vec::new();
        let mut reference = start();
        while let Some(x) = reference.next().await {
            full.push(x.unwrap_or_else(|e| panic!("case {case} {recipe:?}: {e:#}")));
        }
        // Up to three interruptions in one run, each resumed from the last checkpoint (a
        // resumed run checkpointed and resumed again).
        let mut points: Vec<usize> = (0..rng.random_range(1..4))
            .map(|_| rng.random_range(0..=full.len()))
            .collect();
        points.sort_unstable();
        let mut seen = Vec::new();
        let mut epoch = start();
        for &point in &points {
            while seen.len() < point {
                match epoch.next().await {
                    Some(x) => seen.push(x.unwrap()),
                    None => break,
                }
            }
            let bytes = epoch
                .checkpoint()
                .unwrap_or_else(|e| panic!("case {case} {recipe:?} at {point}: {e:#}"))
                .to_bytes();
            drop(epoch);
            let checkpoint = Checkpoint::from_bytes(&bytes).unwrap();
            epoch = build(&recipe).iter_from(&checkpoint).unwrap();
        }
        while let Some(x) = epoch.next().await {
            seen.push(x.unwrap_or_else(|e| panic!("case {case} {recipe:?}: {e:#}")));
        }
        assert_eq!(
            seen, full,
            "case {case}: {recipe:?}, interrupted at {points:?}"
        );
    }
}
