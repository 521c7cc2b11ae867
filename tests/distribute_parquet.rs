//! Data-parallel sharding of Parquet files by row group (`ShardPolicy::RowGroup`): W ranks
//! over files of uneven sizes and row-group counts take the same number of batches (known
//! from the footers before the epoch), read disjoint shards that cover the rows, and the
//! coverage check catches two processes given the same rank; a rank resumes from its
//! checkpoint, and an interrupted epoch resumes on another number of ranks.
#![cfg(feature = "parquet")]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt;
use streamload::distribute::{
    Coverage, CoverageReport, Distribute, Distributed, Remainder, ShardPlan, ShardPolicy,
    ShardSource,
};
use streamload::format::parquet::arrow_array::{Array, ArrayRef, Int64Array};
use streamload::format::parquet::{ParquetDataset, ParquetShards, RecordBatch};

#[path = "support/resume.rs"]
mod resume;

#[path = "support/with_errors.rs"]
mod with_errors;

/// Rows per batch in these tests.
const BATCH: usize = 3;

/// Files of `(rows, max row group size)`; row `r` of file `f` has `file = f`, `row = r`.
fn write_files(dir: &Path, specs: &[(i64, usize)]) -> Vec<PathBuf> {
    specs
        .iter()
        .enumerate()
        .map(|(f, &(rows, group))| {
            let file: ArrayRef =
                Arc::new(Int64Array::from_iter_values((0..rows).map(|_| f as i64)));
            let row: ArrayRef = Arc::new(Int64Array::from_iter_values(0..rows));
            let batch = RecordBatch::try_from_iter([("file", file), ("row", row)]).unwrap();
            let props = parquet::file::properties::WriterProperties::builder()
                .set_max_row_group_row_count(Some(group))
                .build();
            let path = dir.join(format!("part-{f:02}.parquet"));
            let out = std::fs::File::create(&path).unwrap();
            let mut writer =
                parquet::arrow::ArrowWriter::try_new(out, batch.schema(), Some(props)).unwrap();
            writer.write(&batch).unwrap();
            writer.close().unwrap();
            path
        })
        .collect()
}

/// Each file's row groups' row counts, read with the `parquet` crate itself.
fn row_groups(files: &[PathBuf]) -> Vec<Vec<u64>> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    files
        .iter()
        .map(|path| {
            let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
            reader
                .metadata()
                .row_groups()
                .iter()
                .map(|g| g.num_rows() as u64)
                .collect()
        })
        .collect()
}

/// The rows batch `index` of a file with these row groups holds: batches of `BATCH` rows,
/// never across row groups.
fn rows_of_batch(groups: &[u64], index: u64) -> std::ops::Range<i64> {
    let (mut k, mut base) = (index, 0u64);
    for &rows in groups {
        let n = rows.div_ceil(BATCH as u64);
        if k < n {
            let start = base + k * BATCH as u64;
            let end = (start + BATCH as u64).min(base + rows);
            return start as i64..end as i64;
        }
        k -= n;
        base += rows;
    }
    panic!("no batch {index} in a file of row groups {groups:?}");
}

fn column(batch: &RecordBatch, name: &str) -> Vec<i64> {
    let array = batch.column_by_name(name).unwrap();
    let array = array.as_any().downcast_ref::<Int64Array>().unwrap();
    assert_eq!(array.null_count(), 0);
    array.values().to_vec()
}

/// Checks that a batch holds the rows its marks name.
fn check_marks(d: &Distributed<RecordBatch>, layout: &[Vec<u64>]) {
    let want: Vec<i64> = rows_of_batch(&layout[d.file], d.record).collect();
    assert_eq!(
        column(&d.item, "row"),
        want,
        "batch {} of file {}",
        d.record,
        d.file
    );
    assert!(column(&d.item, "file").iter().all(|&f| f == d.file as i64));
}

async fn open(files: &[PathBuf]) -> ParquetShards {
    ParquetDataset::new(files)
        .batch_size(BATCH)
        .shard_source()
        .await
        .unwrap()
}

/// A rank's batch count, real rows `(file, row)` and coverage.
type RankRun = (u64, Vec<(usize, i64)>, Coverage);

async fn run_rank(
    plan: ShardPlan<ParquetShards>,
    layout: Arc<Vec<Vec<u64>>>,
    epoch: u64,
) -> RankRun {
    let ds = plan.dataset();
    let expected = ds.cardinality().finite().expect("known before the epoch");
    assert_eq!(expected, plan.elements_per_rank());
    let mut coverage = plan.coverage(epoch);
    let mut real = Vec::new();
    let mut n = 0;
    let mut stream = ds.iter();
    while let Some(d) = stream.next().await {
        let d = d.unwrap();
        n += 1;
        check_marks(&d, &layout);
        coverage.add(&d);
        if !d.padded {
            real.extend(column(&d.item, "row").into_iter().map(|r| (d.file, r)));
        }
    }
    assert_eq!(n, expected, "batches as the cardinality said");
    (n, real, coverage)
}

/// All ranks at once (tasks), rank `ranks[i]` each.
async fn run_world(
    files: &[PathBuf],
    ranks: &[usize],
    dist: impl Fn(usize) -> Distribute,
) -> Vec<RankRun> {
    let layout = Arc::new(row_groups(files));
    let source = open(files).await;
    let mut tasks = Vec::new();
    for &rank in ranks {
        let plan = dist(rank).plan(source.clone()).await.unwrap();
        tasks.push(tokio::spawn(run_rank(plan, Arc::clone(&layout), 0)));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// Uneven files: 37 rows in groups of 10, 5 in one group, an empty file, 61 in groups of 7,
/// 12 in one group, 23 in groups of 4.
const SPECS: [(i64, usize); 6] = [(37, 10), (5, 8), (0, 4), (61, 7), (12, 12), (23, 4)];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_world_size_takes_equal_batches_over_disjoint_complete_row_groups() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &SPECS);
    let layout = row_groups(&files);
    assert!(layout[3].len() == 9 && layout[5].len() == 6, "{layout:?}");
    let total_rows: i64 = SPECS.iter().map(|s| s.0).sum();
    let total_batches: u64 = layout
        .iter()
        .flatten()
        .map(|&r| r.div_ceil(BATCH as u64))
        .sum();
    for w in 1..=5 {
        for remainder in [Remainder::Drop, Remainder::Pad] {
            let what = format!("{w} ranks, {remainder:?}");
            let dist = |r| {
                Distribute::new(r, w)
                    .policy(ShardPolicy::RowGroup)
                    .remainder(remainder)
            };
            let ranks: Vec<usize> = (0..w).collect();
            let results = run_world(&files, &ranks, dist).await;
            let counts: BTreeSet<u64> = results.iter().map(|r| r.0).collect();
            assert_eq!(counts.len(), 1, "{what}: batch counts differ: {counts:?}");
            let mut rows: Vec<(usize, i64)> = results.iter().flat_map(|r| r.1.clone()).collect();
            let n = rows.len();
            rows.sort_unstable();
            rows.dedup();
            assert_eq!(rows.len(), n, "{what}: a row read by two ranks");
            if remainder == Remainder::Pad {
                assert_eq!(
                    n as i64, total_rows,
                    "{what}: padding aside, every row once"
                );
            }
            let summaries: Vec<Coverage> = results.iter().map(|r| r.2.clone()).collect();
            let report = CoverageReport::merge(&summaries).unwrap();
            assert!(report.disjoint() && report.complete(), "{what}: {report}");
            assert_eq!(report.total, total_batches, "{what}");
            assert_eq!(
                report.elements + report.dropped,
                total_batches,
                "{what}: {report}"
            );
            // Each rank's shard is whole row groups: no row group is read by two ranks.
            let source = open(&files).await;
            let mut groups = BTreeSet::new();
            for r in 0..w {
                let plan = dist(r).plan(source.clone()).await.unwrap();
                assert_eq!(plan.policy(), ShardPolicy::RowGroup);
                for unit in plan.units(0) {
                    assert!(
                        groups.insert((unit.file, unit.start)),
                        "{what}: {unit:?} twice"
                    );
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_deals_row_groups_when_files_are_few_or_uneven() {
    let dir = tempfile::tempdir().unwrap();
    // Two files: 100 rows in groups of 10 (40 batches), 9 rows in one group (3 batches).
    let files = write_files(dir.path(), &[(100, 10), (9, 9)]);
    let source = open(&files).await;
    assert_eq!(source.count().await.unwrap(), [40, 3]);
    assert_eq!(source.row_groups().unwrap()[0], vec![4; 10]);
    for w in [2, 3] {
        let plan = Distribute::new(0, w).plan(source.clone()).await.unwrap();
        assert_eq!(plan.policy(), ShardPolicy::RowGroup, "{w} ranks");
        // 43 batches over 2 ranks: 23 and 20 (Drop keeps 20); by file it would be 40 and 3.
        if w == 2 {
            assert_eq!(plan.elements_per_rank(), 20);
        }
    }
    // Files of equal sizes: by file, as for any source.
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[(30, 10), (30, 10), (30, 10)]);
    let source = open(&files).await;
    let plan = Distribute::new(1, 3).plan(source.clone()).await.unwrap();
    assert_eq!(plan.policy(), ShardPolicy::File);
    // One file, more ranks than files: by row group.
    let plan = Distribute::new(1, 2)
        .plan(open(&files[..1]).await)
        .await
        .unwrap();
    assert_eq!(plan.policy(), ShardPolicy::RowGroup);
    assert_eq!(plan.elements_per_rank(), 4); // 3 row groups of 4 batches: 8 and 4
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_given_the_same_rank_are_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &SPECS);
    let dist = |r| Distribute::new(r, 3).policy(ShardPolicy::RowGroup);
    let results = run_world(&files, &[0, 1, 1], dist).await;
    let summaries: Vec<Coverage> = results.into_iter().map(|r| r.2).collect();
    let report = CoverageReport::merge(&summaries).unwrap();
    assert!(!report.disjoint() && !report.complete(), "{report}");
    assert_eq!(report.duplicate_ranks, [1]);
    assert_eq!(report.missing_ranks, [2]);
    assert!(
        !report.overlaps.is_empty() && !report.gaps.is_empty(),
        "{report}"
    );
    assert!(
        report
            .to_string()
            .contains("ranks given to more than one process: [1]"),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rank_resumes_exactly_from_its_checkpoint_and_only_there() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &SPECS);
    let files = &files;
    // Each make reads the footers again, as a restarted process would.
    let make = |rank| async move {
        Distribute::new(rank, 3)
            .policy(ShardPolicy::RowGroup)
            .remainder(Remainder::Pad)
            .rotate(5)
            .plan(open(files).await)
            .await
            .unwrap()
            .dataset()
    };
    for rank in 0..3 {
        let full = make(rank).await.collect().await.unwrap();
        let n = full.len();
        for k in [0, 1, 2, 4, n / 2, n - 1, n] {
            let (seen, checkpoint) =
                resume::take_then_resume(make(rank).await, make(rank).await, k).await;
            assert_eq!(seen, full, "rank {rank} resumed after {k} batches");
            let other = make((rank + 1) % 3).await;
            let err = other.iter_from(&checkpoint).unwrap_err();
            assert!(err.to_string().contains("another recipe"), "{err}");
        }
    }
}

/// Each rank of `w` takes `taken[rank]` batches, keeping its coverage (through bytes).
async fn interrupted(
    source: &ParquetShards,
    w: usize,
    taken: &[usize],
    remainder: Remainder,
) -> Vec<Coverage> {
    let mut out = Vec::new();
    for (rank, &take) in taken.iter().enumerate().take(w) {
        let plan = Distribute::new(rank, w)
            .policy(ShardPolicy::RowGroup)
            .remainder(remainder)
            .plan(source.clone())
            .await
            .unwrap();
        out.push(resume::covered(&plan, take).await);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_epoch_resumes_on_another_world_size_without_reading_twice_or_skipping() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &SPECS);
    let layout = Arc::new(row_groups(&files));
    let source = open(&files).await;
    let total: u64 = source.count().await.unwrap().iter().sum();
    for remainder in [Remainder::Drop, Remainder::Pad] {
        // Ranks stopped inside row groups, after several row groups of one file, at 0 and
        // past their end.
        for (old_w, taken) in [
            (3, vec![5, 0, 30]),
            (4, vec![1, 2, 9, 100]),
            (2, vec![11, 7]),
        ] {
            let old = interrupted(&source, old_w, &taken, remainder).await;
            for new_w in 1..=5 {
                let what = format!("{old_w} -> {new_w} ranks, {remainder:?}");
                let mut results = Vec::new();
                for rank in 0..new_w {
                    let full = Distribute::new(rank, new_w)
                        .policy(ShardPolicy::RowGroup)
                        .remainder(remainder)
                        .plan(source.clone())
                        .await
                        .unwrap();
                    let rest = full
                        .resume(&old)
                        .unwrap_or_else(|e| panic!("{what}: {e:#}"));
                    results.push(run_rank(rest, Arc::clone(&layout), 0).await);
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
async fn what_cannot_be_served_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[(20, 5), (7, 7)]);
    // A dataset already sharded.
    let err = ParquetDataset::new(&files)
        .shard(2, 0)
        .shard_source()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("already sharded"), "{err}");
    // A missing file and a file that is not Parquet are named.
    let missing = dir.path().join("missing.parquet");
    let err = ParquetDataset::new([&files[0], &missing])
        .shard_source()
        .await
        .unwrap_err();
    assert!(format!("{err:#}").contains("missing.parquet"), "{err:#}");
    let bad = dir.path().join("bad.parquet");
    std::fs::write(&bad, b"PAR1 this is not a parquet file PAR1").unwrap();
    let err = ParquetDataset::new([&bad])
        .shard_source()
        .await
        .unwrap_err();
    assert!(format!("{err:#}").contains("bad.parquet"), "{err:#}");
    // By record: Parquet does not seek to a batch without its row group.
    let source = open(&files).await;
    let err = Distribute::new(0, 2)
        .policy(ShardPolicy::Record)
        .plan(source.clone())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("ShardPolicy::Record needs"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_epoch_taken_out_of_order_resumes_exactly_on_more_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &SPECS);
    let layout = Arc::new(row_groups(&files));
    let source = open(&files).await;
    // One rank took 9 batches through a shuffle: runs scattered over row groups.
    let plan = Distribute::new(0, 1)
        .policy(ShardPolicy::RowGroup)
        .plan(source.clone())
        .await
        .unwrap();
    let mut coverage = plan.coverage(0);
    let mut epoch = plan.dataset().shuffle(8, Some(1)).iter();
    for _ in 0..9 {
        coverage.add(&epoch.next().await.unwrap().unwrap());
    }
    drop(epoch);
    let mut all = vec![coverage.clone()];
    for rank in 0..3 {
        let new = Distribute::new(rank, 3)
            .policy(ShardPolicy::RowGroup)
            .remainder(Remainder::Pad)
            .plan(source.clone())
            .await
            .unwrap();
        let rest = new.resume(std::slice::from_ref(&coverage)).unwrap();
        all.push(run_rank(rest, Arc::clone(&layout), 0).await.2);
    }
    let report = CoverageReport::merge(&all).unwrap();
    assert!(report.disjoint() && report.complete(), "{report}");
    assert_eq!(
        report.elements,
        source.count().await.unwrap().iter().sum::<u64>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_in_a_store_shard_as_local_files_do() {
    use object_store::{ObjectStoreExt, PutPayload, memory::InMemory, path::Path as StorePath};
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &SPECS);
    let layout = Arc::new(row_groups(&files));
    let store = Arc::new(InMemory::new());
    let mut urls = Vec::new();
    for (f, path) in files.iter().enumerate() {
        let key = format!("data/part-{f:02}.parquet");
        let bytes = std::fs::read(path).unwrap();
        store
            .put(&StorePath::from(key.as_str()), PutPayload::from(bytes))
            .await
            .unwrap();
        urls.push(format!("memory://distribute-parquet/{key}"));
    }
    streamload::storage::register("memory://distribute-parquet", store).unwrap();
    let remote = ParquetDataset::new(&urls)
        .batch_size(BATCH)
        .shard_source()
        .await
        .unwrap();
    let local = open(&files).await;
    assert_eq!(remote.count().await.unwrap(), local.count().await.unwrap());
    assert_eq!(remote.row_groups(), local.row_groups());
    let mut summaries = Vec::new();
    for rank in 0..4 {
        let plan = Distribute::new(rank, 4)
            .policy(ShardPolicy::RowGroup)
            .remainder(Remainder::Pad)
            .plan(remote.clone())
            .await
            .unwrap();
        summaries.push(run_rank(plan, Arc::clone(&layout), 0).await.2);
    }
    let report = CoverageReport::merge(&summaries).unwrap();
    assert!(report.disjoint() && report.complete(), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_over_files_that_changed_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &SPECS);
    let plan = |files: Vec<PathBuf>| async move {
        Distribute::new(1, 2)
            .policy(ShardPolicy::RowGroup)
            .plan(open(&files).await)
            .await
            .unwrap()
    };
    let ds = plan(files.clone()).await.dataset();
    let mut epoch = ds.iter();
    for _ in 0..3 {
        epoch.next().await.unwrap().unwrap();
    }
    let checkpoint = epoch.checkpoint().unwrap();
    drop(epoch);
    // The same rows in other row groups: the footers say so, the checkpoint is refused.
    let mut changed = SPECS;
    changed[3].1 = 5;
    write_files(dir.path(), &changed);
    let err = plan(files.clone())
        .await
        .dataset()
        .iter_from(&checkpoint)
        .unwrap_err();
    assert!(err.to_string().contains("another recipe"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rank_resumes_past_a_damaged_row_group_it_passed_on() {
    // File 3's first row group has a damaged page header: its batches are one error
    // element, and the rank's batch count falls short (the plan's `assert_cardinality` says
    // so at the end). A resume from after either error goes on as the epoch did.
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &SPECS);
    let mut bytes = std::fs::read(&files[3]).unwrap();
    bytes[4..40].fill(0xff);
    std::fs::write(&files[3], &bytes).unwrap();
    let plan = Distribute::new(0, 1)
        .policy(ShardPolicy::RowGroup)
        .plan(open(&files).await)
        .await
        .unwrap();
    // Each batch by where it was read and its rows.
    let make = || {
        plan.dataset()
            .map(|d| (d.file, d.record, d.item.num_rows()))
    };
    let errors = with_errors::assert_exact_with_errors(make, 0..=1000).await;
    assert_eq!(errors, 2);
}
