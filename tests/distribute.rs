//! Data-parallel sharding: W ranks (tasks on one runtime) over files of uneven sizes take the
//! same number of batches, read disjoint shards that cover the data, and the coverage check
//! catches two processes given the same rank; checkpoints restore a rank exactly, and an
//! interrupted epoch resumes on another number of ranks without reading anything twice.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use futures::StreamExt;
use streamload::Dataset;
use streamload::distribute::{
    Coverage, CoverageReport, Distribute, Distributed, Remainder, ShardPlan, ShardPolicy,
    ShardSource,
};
use streamload::format::{Compression, TFRecordDataset, TFRecordWriter};

#[path = "support/resume.rs"]
mod resume;

/// Files of these sizes; record `r` of file `f` is `"f/r"`.
async fn write_files(dir: &Path, sizes: &[u64]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for (f, &n) in sizes.iter().enumerate() {
        let path = dir.join(format!("part-{f:02}.tfrecord"));
        let file = tokio::fs::File::create(&path).await.unwrap();
        let mut writer = TFRecordWriter::new(file, Compression::None);
        for r in 0..n {
            writer.write(format!("{f}/{r}").as_bytes()).await.unwrap();
        }
        writer.finish().await.unwrap();
        files.push(path);
    }
    files
}

/// The `(file, record)` a record's payload names.
fn named(bytes: &[u8]) -> (usize, u64) {
    let text = std::str::from_utf8(bytes).unwrap();
    let (f, r) = text.split_once('/').unwrap();
    (f.parse().unwrap(), r.parse().unwrap())
}

/// A rank's batch count, real elements `(file, record)` and coverage.
type RankRun = (u64, Vec<(usize, u64)>, Coverage);

/// One rank's epoch: its batches (of `batch` elements), checked against their marks, and its
/// coverage.
async fn run_rank<S: ShardSource<Item = bytes::Bytes>>(
    plan: ShardPlan<S>,
    epoch: u64,
    batch: usize,
) -> RankRun {
    let batches = plan.dataset().batch(batch);
    let expected = batches
        .cardinality()
        .finite()
        .expect("known before the epoch");
    let mut coverage = plan.coverage(epoch);
    let mut real = Vec::new();
    let mut n = 0;
    let mut stream = batches.iter();
    while let Some(b) = stream.next().await {
        n += 1;
        for d in b.unwrap() {
            assert_eq!(named(&d.item), (d.file, d.record), "an element's marks");
            coverage.add(&d);
            if !d.padded {
                real.push((d.file, d.record));
            }
        }
    }
    assert_eq!(n, expected, "batches as the cardinality said");
    (n, real, coverage)
}

/// Runs all `w` ranks at once (tasks), each with rank `ranks[i]`, and returns each one's
/// batch count, real elements and coverage.
async fn run_world(
    files: &[PathBuf],
    ranks: &[usize],
    w: usize,
    dist: impl Fn(usize) -> Distribute,
    epoch: u64,
) -> Vec<RankRun> {
    let mut tasks = Vec::new();
    for &rank in ranks {
        let plan = dist(rank)
            .plan(TFRecordDataset::new(files))
            .await
            .unwrap_or_else(|e| panic!("plan of rank {rank} of {w}: {e:#}"));
        tasks.push(tokio::spawn(run_rank(plan, epoch, 4)));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

fn assert_disjoint_complete(results: &[RankRun], sizes: &[u64], remainder: Remainder, what: &str) {
    let counts: BTreeSet<u64> = results.iter().map(|r| r.0).collect();
    assert_eq!(counts.len(), 1, "{what}: batch counts differ: {counts:?}");
    let mut all: Vec<(usize, u64)> = results.iter().flat_map(|r| r.1.clone()).collect();
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "{what}: an element read by two ranks");
    let total: u64 = sizes.iter().sum();
    if remainder == Remainder::Pad {
        assert_eq!(n as u64, total, "{what}: padding aside, every element once");
    }
    let summaries: Vec<Coverage> = results.iter().map(|r| r.2.clone()).collect();
    let report = CoverageReport::merge(&summaries).unwrap();
    assert!(report.disjoint() && report.complete(), "{what}: {report}");
    assert_eq!(report.elements as usize, n, "{what}");
    assert_eq!(report.elements + report.dropped, total, "{what}: {report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_world_size_takes_equal_batches_over_disjoint_complete_shards() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [13, 1, 8, 0, 21, 5, 3];
    let files = write_files(dir.path(), &sizes).await;
    for w in 1..=5 {
        for remainder in [Remainder::Drop, Remainder::Pad] {
            let ranks: Vec<usize> = (0..w).collect();
            let dist = |r| Distribute::new(r, w).remainder(remainder);
            let results = run_world(&files, &ranks, w, dist, 0).await;
            let what = format!("{w} ranks, {remainder:?}");
            assert_disjoint_complete(&results, &sizes, remainder, &what);
            // Six files hold records: by file up to 5 ranks.
            let plan = dist(0).plan(TFRecordDataset::new(&files)).await.unwrap();
            assert_eq!(plan.policy(), ShardPolicy::File, "{what}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_files_fall_back_to_elements() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [11, 6];
    let files = write_files(dir.path(), &sizes).await;
    for w in 1..=5 {
        for remainder in [Remainder::Drop, Remainder::Pad] {
            let ranks: Vec<usize> = (0..w).collect();
            let dist = |r| Distribute::new(r, w).remainder(remainder);
            let plan = dist(0).plan(TFRecordDataset::new(&files)).await.unwrap();
            let expected = if w <= 2 {
                ShardPolicy::File
            } else {
                ShardPolicy::Element
            };
            assert_eq!(plan.policy(), expected);
            let results = run_world(&files, &ranks, w, dist, 0).await;
            assert_disjoint_complete(&results, &sizes, remainder, &format!("{w}, {remainder:?}"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexed_files_are_split_by_record_between_more_ranks_than_files() {
    use streamload::format::{IndexedTFRecords, TFRecordIndex};
    let dir = tempfile::tempdir().unwrap();
    let sizes = [11, 6, 0];
    let files = write_files(dir.path(), &sizes).await;
    let mut indexes = Vec::new();
    for f in &files {
        indexes.push(TFRecordIndex::build(f).await.unwrap());
    }
    let source = IndexedTFRecords::from_indexes(&files, indexes)
        .await
        .unwrap();
    for w in 1..=5 {
        for remainder in [Remainder::Drop, Remainder::Pad] {
            for policy in [ShardPolicy::Auto, ShardPolicy::Record] {
                let what = format!("{w} ranks, {remainder:?}, {policy:?}");
                let mut tasks = Vec::new();
                for rank in 0..w {
                    let plan = Distribute::new(rank, w)
                        .remainder(remainder)
                        .policy(policy)
                        .plan(source.clone())
                        .await
                        .unwrap_or_else(|e| panic!("{what}: {e:#}"));
                    let expected = if policy == ShardPolicy::Auto && w <= 2 {
                        ShardPolicy::File
                    } else {
                        ShardPolicy::Record
                    };
                    assert_eq!(plan.policy(), expected, "{what}");
                    tasks.push(tokio::spawn(run_rank(plan, 0, 3)));
                }
                let mut results = Vec::new();
                for t in tasks {
                    results.push(t.await.unwrap());
                }
                assert_disjoint_complete(&results, &sizes, remainder, &what);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_deals_other_files_each_epoch_with_the_same_steps() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [9, 4, 7, 2, 6, 5];
    let files = write_files(dir.path(), &sizes).await;
    let w = 3;
    let dist = |r| Distribute::new(r, w).remainder(Remainder::Pad).rotate(11);
    let plan = dist(0).plan(TFRecordDataset::new(&files)).await.unwrap();
    let firsts: BTreeSet<Vec<usize>> = (0..6)
        .map(|e| plan.units(e).iter().map(|u| u.file).collect())
        .collect();
    assert!(firsts.len() > 1, "rank 0 reads the same files every epoch");
    let ds = plan.dataset();
    let steps = ds.cardinality();
    for epoch in 0..3 {
        // The same recipe iterated again is the next epoch.
        let got: Vec<Distributed<bytes::Bytes>> = ds.collect().await.unwrap();
        assert_eq!(Some(got.len() as u64), steps.finite());
        let files_read: BTreeSet<usize> = got.iter().map(|d| d.file).collect();
        let planned: BTreeSet<usize> = plan.units(epoch).iter().map(|u| u.file).collect();
        assert_eq!(files_read, planned, "epoch {epoch}");
        let results = run_world(&files, &[0, 1, 2], w, dist, epoch).await;
        assert_disjoint_complete(&results, &sizes, Remainder::Pad, &format!("epoch {epoch}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_given_the_same_rank_are_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [13, 1, 8, 21, 5, 3];
    let files = write_files(dir.path(), &sizes).await;
    for policy in [ShardPolicy::File, ShardPolicy::Element] {
        let dist = |r| Distribute::new(r, 3).policy(policy);
        let results = run_world(&files, &[0, 1, 1], 3, dist, 0).await;
        let summaries: Vec<Coverage> = results.into_iter().map(|r| r.2).collect();
        let report = CoverageReport::merge(&summaries).unwrap();
        assert!(
            !report.disjoint() && !report.complete(),
            "{policy:?}: {report}"
        );
        assert_eq!(report.duplicate_ranks, [1], "{policy:?}");
        assert_eq!(report.missing_ranks, [2], "{policy:?}");
        assert!(!report.overlaps.is_empty(), "{policy:?}: {report}");
        assert!(
            report
                .overlaps
                .iter()
                .all(|o| o.ranks.iter().filter(|&&r| r == 1).count() == 2),
            "{policy:?}: the overlaps name rank 1 twice: {report}"
        );
        assert!(!report.gaps.is_empty(), "{policy:?}: {report}");
        let text = report.to_string();
        assert!(
            text.contains("ranks given to more than one process: [1]"),
            "{text}"
        );
        // The summaries go through serde (the user gathers them as bytes).
        let json = serde_json::to_string(&summaries).unwrap();
        let back: Vec<Coverage> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, summaries);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rank_resumes_exactly_from_its_checkpoint_and_only_there() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [13, 1, 8, 21, 5, 3];
    let files = write_files(dir.path(), &sizes).await;
    let files = &files;
    let make = |rank| async move {
        let dist = Distribute::new(rank, 3).remainder(Remainder::Pad).rotate(5);
        dist.plan(TFRecordDataset::new(files))
            .await
            .unwrap()
            .dataset()
            .batch(3)
    };
    for rank in 0..3 {
        let full = make(rank).await.collect().await.unwrap();
        for k in [0, 1, full.len() / 2, full.len() - 1, full.len()] {
            let (seen, checkpoint) =
                resume::take_then_resume(make(rank).await, make(rank).await, k).await;
            assert_eq!(seen, full, "rank {rank} resumed after {k} batches");
            // Another rank's recipe refuses it.
            let other = make((rank + 1) % 3).await;
            let err = other.iter_from(&checkpoint).unwrap_err();
            assert!(err.to_string().contains("another recipe"), "{err}");
        }
    }
}

/// Each rank of `w` takes `taken[rank]` elements (in order), keeping its coverage.
async fn interrupted(
    files: &[PathBuf],
    w: usize,
    taken: &[usize],
    remainder: Remainder,
) -> Vec<Coverage> {
    let mut out = Vec::new();
    for (rank, &take) in taken.iter().enumerate().take(w) {
        let plan = Distribute::new(rank, w)
            .remainder(remainder)
            .plan(TFRecordDataset::new(files))
            .await
            .unwrap();
        out.push(resume::covered(&plan, take).await);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_epoch_resumes_on_another_world_size_without_reading_twice_or_skipping() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [13, 1, 8, 21, 5, 3, 9];
    let files = write_files(dir.path(), &sizes).await;
    let total: u64 = sizes.iter().sum();
    for remainder in [Remainder::Drop, Remainder::Pad] {
        for (old_w, taken) in [
            (3, vec![4, 0, 30]),
            (4, vec![1, 2, 3, 100]),
            (2, vec![7, 7]),
        ] {
            let old = interrupted(&files, old_w, &taken, remainder).await;
            for new_w in 1..=5 {
                let what = format!("{old_w} -> {new_w} ranks, {remainder:?}");
                let mut results = Vec::new();
                for rank in 0..new_w {
                    let full = Distribute::new(rank, new_w)
                        .remainder(remainder)
                        .plan(TFRecordDataset::new(&files))
                        .await
                        .unwrap();
                    let rest = full
                        .resume(&old)
                        .unwrap_or_else(|e| panic!("{what}: {e:#}"));
                    results.push(run_rank(rest, 0, 2).await);
                }
                resume::assert_exact_resume(
                    &what,
                    &old,
                    results.into_iter().map(|r| (r.0, r.2)),
                    total,
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elastic_resume_refuses_what_it_cannot_make_exact() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[13, 1, 8, 21, 5, 3]).await;
    let full = Distribute::new(0, 2)
        .plan(TFRecordDataset::new(&files))
        .await
        .unwrap();
    let old = interrupted(&files, 3, &[2, 3, 4], Remainder::Drop).await;
    // A rank missing.
    let err = full.resume(&old[..2]).unwrap_err().to_string();
    assert!(err.contains("no summary of rank 2 of 3"), "{err}");
    // A rank given twice.
    let twice = vec![old[0].clone(), old[1].clone(), old[1].clone()];
    let err = full.resume(&twice).unwrap_err().to_string();
    assert!(err.contains("rank 1 of 3 has two summaries"), "{err}");
    // Taken out of order (a shuffle after the plan's dataset): the runs taken are kept, and
    // the two new ranks are dealt exactly the rest.
    let plan = Distribute::new(0, 1)
        .plan(TFRecordDataset::new(&files))
        .await
        .unwrap();
    let mut coverage = plan.coverage(0);
    let mut epoch = plan.dataset().shuffle(50, Some(1)).iter();
    for _ in 0..10 {
        coverage.add(&epoch.next().await.unwrap().unwrap());
    }
    let mut all = vec![coverage.clone()];
    for rank in 0..2 {
        let new = Distribute::new(rank, 2)
            .plan(TFRecordDataset::new(&files))
            .await
            .unwrap();
        all.push(
            run_rank(new.resume(&[coverage.clone()]).unwrap(), 0, 2)
                .await
                .2,
        );
    }
    let report = CoverageReport::merge(&all).unwrap();
    assert!(report.disjoint() && report.complete(), "{report}");
    // Scattered over more runs than a summary keeps: refused.
    let mut scattered = plan.coverage(0);
    for i in 0..5000 {
        scattered.add(&Distributed {
            item: (),
            padded: false,
            file: 3,
            record: 2 * i,
            offset: 0,
        });
    }
    let err = full.resume(&[scattered]).unwrap_err().to_string();
    assert!(err.contains("in more than 4096 runs of records"), "{err}");
    // Taken twice by one rank.
    let mut twice = plan.coverage(0);
    for record in [0, 1, 1] {
        twice.add(&Distributed {
            item: (),
            padded: false,
            file: 0,
            record,
            offset: 0,
        });
    }
    let err = full.resume(&[twice]).unwrap_err().to_string();
    assert!(err.contains("it took some twice"), "{err}");
    // By element.
    let elements = Distribute::new(0, 1).policy(ShardPolicy::Element);
    let plan = elements.plan(TFRecordDataset::new(&files)).await.unwrap();
    let err = full.resume(&[plan.coverage(0)]).unwrap_err().to_string();
    assert!(err.contains("read by element"), "{err}");
}

#[tokio::test]
async fn policies_the_source_cannot_serve_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[4, 0, 3]).await;
    let source = || TFRecordDataset::new(&files);
    let refused = |policy, w| async move {
        Distribute::new(0, w)
            .policy(policy)
            .plan(source())
            .await
            .unwrap_err()
            .to_string()
    };
    let err = refused(ShardPolicy::Record, 2).await;
    assert!(
        err.contains("ShardPolicy::Record needs a source that starts reading at a record"),
        "{err}"
    );
    let err = refused(ShardPolicy::RowGroup, 2).await;
    assert!(
        err.contains("ShardPolicy::RowGroup needs a source that knows its row groups"),
        "{err}"
    );
    let err = refused(ShardPolicy::File, 3).await;
    assert!(err.contains("2 of the 3 files"), "{err}");
    assert!(!source().seekable_records() && source().row_groups().is_none());
    // Padding with a rank that has nothing to repeat.
    let err = Distribute::new(0, 12)
        .remainder(Remainder::Pad)
        .plan(source())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("has no elements to repeat"), "{err}");
    // Counting: by headers, and a damaged file is named.
    assert_eq!(source().count().await.unwrap(), [4, 0, 3]);
    let bad = dir.path().join("bad.tfrecord");
    std::fs::write(&bad, b"this is not a tfrecord file").unwrap();
    let err = format!(
        "{:#}",
        TFRecordDataset::new([&bad]).count().await.unwrap_err()
    );
    assert!(
        err.contains("bad.tfrecord") && err.contains("corrupted record"),
        "{err}"
    );
}

#[tokio::test]
async fn any_dataset_of_known_size_shards_by_element() {
    for w in 1..=5usize {
        for remainder in [Remainder::Drop, Remainder::Pad] {
            let ds = Dataset::range(0, 23);
            let mut seen = Vec::new();
            let mut lengths = BTreeSet::new();
            for rank in 0..w {
                let plan = ds
                    .distribute(&Distribute::new(rank, w).remainder(remainder))
                    .unwrap();
                let by = if w == 1 {
                    ShardPolicy::File
                } else {
                    ShardPolicy::Element
                };
                assert_eq!(plan.policy(), by, "one \"file\": by element unless alone");
                let got = plan.dataset().collect().await.unwrap();
                lengths.insert(got.len());
                for d in got {
                    if d.padded {
                        assert_eq!(d.item as usize % w, rank, "padding from its own shard");
                    } else {
                        seen.push(d.item);
                    }
                }
            }
            assert_eq!(lengths.len(), 1, "{w} {remainder:?}");
            seen.sort_unstable();
            let n = seen.len();
            seen.dedup();
            assert_eq!(seen.len(), n);
            let expected = if remainder == Remainder::Pad {
                23
            } else {
                23 / w * w
            };
            assert_eq!(n, expected, "{w} {remainder:?}");
        }
    }
    let err = Dataset::range(0, 9)
        .filter(|x| x % 2 == 0)
        .distribute(&Distribute::new(0, 2))
        .unwrap_err();
    assert!(err.to_string().contains("cardinality"), "{err}");
}
