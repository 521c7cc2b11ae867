//! Checkpoint exactness over random pipelines: random sources (ranges, vectors, TFRecord
//! files, some damaged: read with `resync` the file goes on after the damage, without it the
//! file ends there) and chains of resumable operations, random parallelism, prefetch depths
//! and AUTOTUNE, and runs interrupted at random points several times (each resume
//! checkpointed and resumed again), each compared with the uninterrupted epoch. Some draws
//! damage a checkpoint's bytes (refused by `from_bytes`), and some change the file between
//! the checkpoint and the resume (refused before any record of the new contents, or nothing
//! more of it is read).

use std::path::{Path, PathBuf};

use futures::StreamExt;
use streamload::format::{Compression, TFRecordDataset, TFRecordWriter};
use streamload::rand::rngs::StdRng;
use streamload::rand::{Rng, SeedableRng};
use streamload::text::Packing;
use streamload::{AUTOTUNE, Checkpoint, Dataset, Error, Mixture, Parallelism};

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
    Shard(u64, u64),
    TakeWhile(i64),
    IgnoreErrors(i64),
    Unique(i64),
    Scan(i64),
    Zip(usize),
    Concatenate(i64),
    Sample(Option<u64>, bool),
    Choose(u64),
    Cache,
    MapAsync(Option<usize>),
    PaddedBatch(usize),
    Unbatch(usize),
    Rebatch(usize, usize),
    Window(usize, usize, usize),
    Bucket(Vec<usize>),
    GroupByWindow(i64, usize),
    /// `pack` of documents made from the elements: sequence length, policy (0 concatenate
    /// and split, 1 first fit, 2 best fit), bins.
    Pack(usize, u8, usize),
    /// `batch_by_tokens` of documents made from the elements, with this budget.
    TokenBatch(usize),
    /// `mix` with a range, weights changing at a step.
    Mix(u64, u64),
}

#[derive(Debug, Clone)]
enum Source {
    Range(i64),
    /// `Dataset::random` with a seed, rerandomized each epoch or not.
    Random(i64, bool),
    Vec(i64),
    /// A TFRecord file of `n` records (each the decimal digits of `10 * i`, 8 wide);
    /// `damaged`: one record's payload damaged (an error in its place), after which the file
    /// goes on when read with `resync`, and ends otherwise.
    File {
        n: i64,
        damaged: bool,
        resync: bool,
    },
}

#[derive(Debug, Clone)]
struct Recipe {
    source: Source,
    ops: Vec<Op>,
    /// The file, for a file source.
    file: Option<PathBuf>,
}

/// Records of 8 digits: a rewrite with other numbers keeps the file's size.
async fn write_file(path: &Path, n: i64, damaged: bool, offset: i64) {
    let mut writer = TFRecordWriter::new(Vec::new(), Compression::None);
    for i in 0..n {
        let payload = format!("{:08}", (i + offset) * 10);
        writer.write(payload.as_bytes()).await.expect("a record");
    }
    let mut bytes = writer.finish().await.expect("the file");
    if damaged && n > 0 {
        // A bit of record n / 2's payload (each record 12 + 8 + 4 bytes).
        bytes[(n as usize / 2) * 24 + 12 + 3] ^= 0x04;
    }
    // A new file put in its place: the old one stays whole for whatever still maps it.
    let new = path.with_extension("new");
    std::fs::write(&new, bytes).expect("write the file");
    std::fs::rename(&new, path).expect("put the file in place");
}

fn parallelism(p: Option<usize>) -> Parallelism {
    p.map_or(AUTOTUNE, Parallelism::Fixed)
}

fn build(recipe: &Recipe) -> Dataset<i64> {
    let mut ds = match recipe.source {
        Source::Vec(n) => Dataset::from_vec((0..n).map(|x| x * 10).collect()),
        Source::Range(n) => Dataset::range(0, n),
        // Small values (the ops multiply them), each epoch the same or not.
        Source::Random(n, again) => Dataset::random(Some(n as u64), again)
            .take(n)
            .map(|r| r.rem_euclid(100_000)),
        Source::File { resync, .. } => {
            let path = recipe.file.as_ref().expect("a file source's path");
            TFRecordDataset::new([path])
                .resync(resync)
                .build()
                .try_map(|r| Ok(std::str::from_utf8(&r)?.parse::<i64>()?))
        }
    };
    for op in &recipe.ops {
        ds = match *op {
            Op::Map(k) => ds.map(move |x| x.wrapping_mul(3).wrapping_add(k)),
            Op::Filter(k) => ds.filter(move |x| x.rem_euclid(k) != 0),
            Op::Take(k) => ds.take(k),
            Op::Skip(k) => ds.skip(k),
            Op::Enumerate => ds
                .enumerate(100)
                .map(|(i, x)| i.wrapping_mul(1_000_000).wrapping_add(x)),
            Op::Shuffle(b, seed) => ds.shuffle(b, Some(seed)),
            Op::BatchSum(b, drop) => {
                let batched = if drop {
                    ds.batch_drop_remainder(b)
                } else {
                    ds.batch(b)
                };
                batched.map(|v| {
                    let sum = v.iter().fold(0i64, |a, &b| a.wrapping_add(b));
                    sum.wrapping_mul(7).wrapping_add(v.len() as i64)
                })
            }
            Op::Prefetch(p) => ds.prefetch(parallelism(p)),
            Op::MapParallel(p) => ds.map_parallel(parallelism(p), |x| x ^ 0x55),
            Op::RandomMap(p, seed) => ds.random_map(p, seed, |x, rng| {
                x.wrapping_mul(1_000)
                    .wrapping_add(rng.random_range(0..1_000))
            }),
            Op::Repeat(k) => ds.repeat_n(k),
            Op::Interleave(cycle, block) => ds.interleave(cycle, block, |x| {
                Dataset::range(0, x.rem_euclid(5)).map(move |y| x.wrapping_mul(10).wrapping_add(y))
            }),
            Op::ParallelInterleave(cycle, block) => {
                ds.parallel_interleave(cycle, block, cycle, |x| {
                    Dataset::range(0, x.rem_euclid(4) + 1)
                        .map(move |y| x.wrapping_mul(10).wrapping_add(y))
                })
            }
            Op::Shard(n, i) => ds.shard(n, i),
            Op::TakeWhile(k) => ds.take_while(move |x| x.rem_euclid(97) != k),
            Op::IgnoreErrors(k) => ds
                .try_map(move |x| {
                    anyhow::ensure!(x.rem_euclid(11) != k, "element {x} fails");
                    Ok(x)
                })
                .ignore_errors(),
            Op::Unique(k) => ds.map(move |x| x.rem_euclid(k)).unique(),
            Op::Scan(k) => ds.scan_resumable(k, |sum, x| {
                (sum.wrapping_add(x), sum.wrapping_mul(3).wrapping_add(x))
            }),
            Op::Zip(n) => Dataset::zip(ds, Dataset::range(0, n as i64).shuffle(7, Some(n as u64)))
                .map(|(a, b)| a.wrapping_mul(1_000).wrapping_add(b)),
            Op::Concatenate(n) => ds.concatenate(&Dataset::range(0, n).map(|x| -x)),
            Op::Sample(seed, stop) => Dataset::sample_from_datasets(
                vec![ds, Dataset::range(0, 30).map(|x| -x - 1)],
                Some(vec![0.7, 0.3]),
                seed,
                stop,
            ),
            Op::Choose(m) => Dataset::choose_from_datasets(
                vec![ds, Dataset::range(0, 40).map(|x| -x - 1)],
                Dataset::range(0, 1_000).map(move |x| i64::from((x as u64 * 7) % m == 0)),
                false,
            ),
            Op::Cache => ds.cache(),
            Op::MapAsync(p) => ds.map_async(parallelism(p), |x| async move {
                tokio::task::yield_now().await;
                x + 5
            }),
            Op::PaddedBatch(b) => ds
                .map(|x| vec![x; x.rem_euclid(4) as usize])
                .padded_batch(b, None, None, false)
                .map(|a| summed(a.iter())),
            Op::Unbatch(b) => ds.batch(b).unbatch(),
            Op::Rebatch(a, b) => ds.batch(a).rebatch(b, false).map(|v| summed(v.iter())),
            Op::Window(size, shift, stride) => ds
                .window(size, shift, stride, false)
                .map(|v| summed(v.iter())),
            Op::Bucket(ref sizes) => ds
                .map(|x| vec![x; x.rem_euclid(7) as usize + 1])
                .bucket_by_sequence_length(
                    |s| s.len(),
                    vec![3, 5],
                    sizes.clone(),
                    streamload::BucketOptions::default(),
                )
                .map(|a| summed(a.iter())),
            Op::GroupByWindow(k, w) => {
                ds.group_by_window(move |x| x.rem_euclid(k), |_, g| g.batch(2).map(|v| v[0]), w)
            }
            Op::Pack(len, policy, bins) => {
                let packing = match policy {
                    0 => Packing::ConcatThenSplit,
                    1 => Packing::FirstFit { bins },
                    _ => Packing::BestFit { bins },
                };
                ds.map(|x| {
                    (0..x.rem_euclid(9) as u32)
                        .map(|i| x as u32 ^ i)
                        .collect::<Vec<u32>>()
                })
                .pack(len, packing)
                .map(|p| {
                    let tokens = p.tokens.iter().map(|&t| i64::from(t));
                    let segments = p.segment_ids.iter().map(|&s| i64::from(s) << 40);
                    let positions = p.positions.iter().map(|&s| i64::from(s) << 20);
                    let all: Vec<i64> = tokens.chain(segments).chain(positions).collect();
                    summed(all.iter())
                })
            }
            Op::Mix(seed, at) => Dataset::mix(
                vec![ds, Dataset::range(0, 40).map(|x| -x - 1)],
                Mixture::piecewise(vec![(0, vec![0.7, 0.3]), (at, vec![0.2, 0.8])]),
                Some(seed),
            ),
            Op::TokenBatch(max) => ds
                .map(move |x| vec![x; x.rem_euclid(max as i64 + 1) as usize])
                .batch_by_tokens(max, Vec::len)
                .map(|b| summed(b.concat().iter())),
        };
    }
    // Unseeded random stages take a seed from OS entropy per recipe: each recipe built here
    // stands for another process, so they derive theirs from the pipeline's global seed
    // (tests/checkpoint.rs resumes entropy-seeded stages within one recipe).
    ds.with_options(streamload::Options::new().seed(0x0123_4567))
}

fn random_recipe(rng: &mut StdRng) -> Recipe {
    let n = rng.random_range(0..400);
    let source = match rng.random_range(0..10) {
        0..=2 => Source::Vec(n),
        3..=5 => Source::File {
            n,
            damaged: rng.random_bool(0.5),
            resync: rng.random_bool(0.5),
        },
        6..=8 => Source::Range(n),
        _ => Source::Random(n, rng.random_bool(0.5)),
    };
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
        let op = match rng.random_range(0..33) {
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
            12 => Op::ParallelInterleave(rng.random_range(1..4), rng.random_range(1..3)),
            13 => {
                let n = rng.random_range(1..4);
                Op::Shard(n, rng.random_range(0..n))
            }
            14 => Op::TakeWhile(rng.random_range(0..97)),
            15 => Op::IgnoreErrors(rng.random_range(0..11)),
            16 => Op::Unique(rng.random_range(5..60)),
            17 => Op::Scan(rng.random_range(0..5)),
            18 => Op::Zip(rng.random_range(0..500)),
            19 => Op::Concatenate(rng.random_range(0..30)),
            20 => Op::Sample(rng.random_bool(0.7).then(|| rng.random()), rng.random()),
            21 => Op::Choose(rng.random_range(2..5)),
            22 => Op::Cache,
            23 => Op::MapAsync(fixed(rng)),
            24 => Op::PaddedBatch(rng.random_range(1..6)),
            25 => Op::Unbatch(rng.random_range(1..6)),
            26 => Op::Rebatch(rng.random_range(1..6), rng.random_range(1..6)),
            27 => {
                let size = rng.random_range(1..5);
                Op::Window(size, rng.random_range(1..4), rng.random_range(1..3))
            }
            28 => Op::Bucket((0..3).map(|_| rng.random_range(1..4)).collect()),
            29 => Op::Pack(
                rng.random_range(1..12),
                rng.random_range(0..3),
                rng.random_range(1..4),
            ),
            30 => Op::TokenBatch(rng.random_range(1..20)),
            31 => Op::Mix(rng.random(), rng.random_range(0..60)),
            _ => Op::GroupByWindow(rng.random_range(1..4), rng.random_range(1..4)),
        };
        ops.push(op);
    }
    Recipe {
        source,
        ops,
        file: None,
    }
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
    // STREAMLOAD_CHECKPOINT_ONLY=n: interrupt case n only (the others are still drawn).
    let only: Option<usize> = std::env::var("STREAMLOAD_CHECKPOINT_ONLY")
        .ok()
        .and_then(|n| n.parse().ok());
    let dir = tempfile::tempdir().expect("a temporary directory");
    for case in 0..cases {
        let mut recipe = random_recipe(&mut rng);
        let damage_bytes = rng.random_bool(0.1).then(|| rng.random::<u64>());
        let change_file = rng.random_bool(0.15);
        if let Source::File { n, damaged, .. } = recipe.source {
            let path = dir.path().join(format!("case-{case}.tfrecord"));
            write_file(&path, n, damaged, 0).await;
            recipe.file = Some(path);
        }
        let damaged = matches!(recipe.source, Source::File { damaged: true, .. });
        // Errors are elements too: the damaged record's, and what the stages
        // make of it. Any other error is a failure of the test.
        let element = |x: anyhow::Result<i64>, when: &str| -> Result<i64, String> {
            x.map_err(|e| {
                // (A window holding the damaged element yields it as its error, a copy of
                // the message for every window after the first.)
                let data_loss = format!("{e:#}").contains("corrupted record");
                assert!(damaged && data_loss, "case {case} {recipe:?} {when}: {e:#}");
                format!("{e:#}")
            })
        };
        let start = || build(&recipe).iter();
        let mut full = Vec::new();
        let mut reference = start();
        while let Some(x) = reference.next().await {
            full.push(element(x, "uninterrupted"));
        }
        // Up to three interruptions in one run, each resumed from the last checkpoint (a
        // resumed run checkpointed and resumed again).
        let mut points: Vec<usize> = (0..rng.random_range(1..4))
            .map(|_| rng.random_range(0..=full.len()))
            .collect();
        points.sort_unstable();
        if only.is_some_and(|n| n != case) {
            continue;
        }
        let mut seen = Vec::new();
        let mut last_bytes = Vec::new();
        let mut epoch = start();
        for &point in &points {
            while seen.len() < point {
                match epoch.next().await {
                    Some(x) => seen.push(element(x, &format!("before {point}"))),
                    None => break,
                }
            }
            let bytes = epoch
                .checkpoint()
                .unwrap_or_else(|e| panic!("case {case} {recipe:?} at {point}: {e:#}"))
                .to_bytes();
            drop(epoch);
            if let Some(flip) = damage_bytes {
                let mut damaged_bytes = bytes.clone();
                let bit = (flip % (bytes.len() as u64 * 8)) as usize;
                damaged_bytes[bit / 8] ^= 1 << (bit % 8);
                assert!(
                    Checkpoint::from_bytes(&damaged_bytes).is_err(),
                    "case {case}: bit {bit} of the checkpoint flipped, and it was accepted"
                );
            }
            let checkpoint = Checkpoint::from_bytes(&bytes).unwrap();
            epoch = build(&recipe).iter_from(&checkpoint).unwrap();
            last_bytes = bytes;
        }
        if change_file && let Some(path) = &recipe.file {
            // Another file of the same size in its place: the rest of the epoch is refused
            // before any record of the new contents, or is what it would have been (nothing
            // more is read from the file).
            drop(epoch);
            // What the earlier resumes gave, before the file changes, is the uninterrupted
            // epoch's (a wrong resume is named as such, not as a changed file's).
            let at = seen.iter().zip(&full).take_while(|(a, b)| a == b).count();
            assert!(
                at == seen.len(),
                "case {case}: {recipe:?}, interrupted at {points:?}: element {at} differs \
                 before the file changed: {:?} against {:?}",
                &seen[at..(at + 3).min(seen.len())],
                &full[at..(at + 3).min(full.len())],
            );
            let Source::File { n, damaged, .. } = recipe.source else {
                unreachable!()
            };
            write_file(path, n, damaged, 7).await;
            let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
            std::fs::File::options()
                .write(true)
                .open(path)
                .and_then(|f| f.set_modified(later))
                .expect("set the file's time");
            let last = seen.len();
            let checkpoint = Checkpoint::from_bytes(&last_bytes).unwrap();
            let mut epoch = match build(&recipe).iter_from(&checkpoint) {
                Ok(epoch) => epoch,
                Err(e) => {
                    assert!(
                        matches!(e.downcast_ref::<Error>(), Some(Error::Checkpoint(_))),
                        "case {case}: {e:#}"
                    );
                    write_file(path, n, damaged, 0).await;
                    continue;
                }
            };
            let mut rest = Vec::new();
            let mut refused = false;
            while let Some(x) = epoch.next().await {
                match x {
                    Err(e) if matches!(e.downcast_ref::<Error>(), Some(Error::Checkpoint(_))) => {
                        refused = true;
                        assert!(
                            epoch.next().await.is_none(),
                            "case {case}: the epoch goes on"
                        );
                        break;
                    }
                    x => rest.push(x.map_err(|e| format!("{e:#}"))),
                }
            }
            // Never a mix: the elements before and after the checkpoint are all of the old
            // file (it was refused before any record of the new one, or nothing more of it
            // was read), or all of the new one (nothing of the old one was delivered).
            let new_full: Vec<Result<i64, String>> = build(&recipe)
                .iter()
                .map(|x| x.map_err(|e| format!("{e:#}")))
                .collect()
                .await;
            let mut all = seen.clone();
            all.extend(rest.iter().cloned());
            let prefix_of = |whole: &[Result<i64, String>]| {
                all.len() <= whole.len() && all[..] == whole[..all.len()]
            };
            if refused {
                assert!(
                    prefix_of(&full) || prefix_of(&new_full),
                    "case {case} {recipe:?}: elements before the refusal: {rest:?}"
                );
            } else {
                assert!(
                    all == full || all == new_full,
                    "case {case} {recipe:?}: a changed file, not refused: {} elements after {last}, \
                     {rest:?}",
                    rest.len()
                );
            }
            // The file as it was, for nothing else.
            write_file(path, n, damaged, 0).await;
            continue;
        }
        while let Some(x) = epoch.next().await {
            seen.push(element(x, "resumed"));
        }
        if seen != full {
            let at = seen.iter().zip(&full).take_while(|(a, b)| a == b).count();
            let around =
                |v: &[Result<i64, String>]| v[at.saturating_sub(2)..(at + 4).min(v.len())].to_vec();
            panic!(
                "case {case}: {recipe:?}, interrupted at {points:?}: {} elements against {}, \
                 first difference at {at}: {:?} against {:?}",
                seen.len(),
                full.len(),
                around(&seen),
                around(&full),
            );
        }
    }
}

/// A batch as one number (wrapping: random pipelines stack multiplications).
fn summed<'a>(v: impl IntoIterator<Item = &'a i64>) -> i64 {
    let (sum, len) = v
        .into_iter()
        .fold((0i64, 0i64), |(a, n), &b| (a.wrapping_add(b), n + 1));
    sum.wrapping_mul(7).wrapping_add(len)
}
