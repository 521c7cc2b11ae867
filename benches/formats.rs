//! Criterion benches of the file formats: W2 (raw TFRecord read, plain and GZIP), W3 (read,
//! shuffle, parse Examples in parallel, batch) and W6 (text lines, split, batch) from
//! WORKLOADS.md, on smaller data generated once into a temporary directory: D1 as 4 shards of
//! 2,048 records (~35 MB), D3 as 200,000 lines. `indexed_tfrecord` reads D1 through its
//! indexes (`IndexedTFRecords`): in order (coalesced ranged reads) and shuffled across files
//! (a positioned read per record). With feature `parquet`, W11 (Parquet, label and weights as
//! tensors) on D5 of the same 4 x 2,048 rows. `examples/workloads.rs --generate DIR` makes
//! the full-size data.

#[path = "support/workloads.rs"]
mod workloads;

/// The allocator `examples/workloads.rs` runs with, so both give the same figures (W3 and W6
/// allocate per element on one thread and free on another; see `mimalloc` in ARCHITECTURE.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn w2(c: &mut Criterion) {
    let rt = workloads::runtime();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let bytes = rt
        .block_on(workloads::generate_d1(dir.path(), 4, 2048))
        .expect("D1 written");
    let mut group = c.benchmark_group("W2_tfrecord_raw");
    group.throughput(Throughput::Bytes(bytes));
    group.sample_size(20);
    for (name, gz) in [("plain", false), ("gzip", true)] {
        let files = workloads::d1_files(dir.path(), gz).expect("D1 files");
        group.bench_function(name, |b| {
            b.to_async(&rt)
                .iter(|| workloads::w2_tfrecord_raw(files.clone(), gz))
        });
    }
    group.finish();

    let files = workloads::d1_files(dir.path(), false).expect("D1 files");
    let mut group = c.benchmark_group("W3_tfrecord_parse");
    group.throughput(Throughput::Elements(4 * 2048));
    group.sample_size(20);
    group.bench_function("records", |b| {
        b.to_async(&rt)
            .iter(|| workloads::w3_tfrecord_parse(files.clone()))
    });
    group.finish();
}

fn w6(c: &mut Criterion) {
    let rt = workloads::runtime();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let lines = 200_000;
    workloads::generate_d3(dir.path(), lines).expect("D3 written");
    let path = dir.path().join("text/lines.txt");
    let mut group = c.benchmark_group("W6_text");
    group.throughput(Throughput::Elements(lines as u64));
    group.sample_size(20);
    group.bench_function("lines", |b| {
        b.to_async(&rt).iter(|| workloads::w6_text(path.clone()))
    });
    group.finish();
}

fn indexed(c: &mut Criterion) {
    use streamload::format::{IndexedTFRecords, TFRecordIndex};
    let rt = workloads::runtime();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let bytes = rt
        .block_on(workloads::generate_d1(dir.path(), 4, 2048))
        .expect("D1 written");
    let files = workloads::d1_files(dir.path(), false).expect("D1 files");
    let indexed = rt
        .block_on(async {
            let mut indexes = Vec::new();
            for file in &files {
                indexes.push(TFRecordIndex::build(file).await?);
            }
            IndexedTFRecords::from_indexes(&files, indexes).await
        })
        .expect("indexes");
    let mut group = c.benchmark_group("indexed_tfrecord");
    group.throughput(Throughput::Bytes(bytes));
    group.sample_size(20);
    for (name, shuffled) in [("in_order", false), ("shuffled", true)] {
        let records = if shuffled {
            indexed.clone().shuffle_records(1).records()
        } else {
            indexed.records()
        };
        group.bench_function(name, |b| b.to_async(&rt).iter(|| records.count()));
    }
    group.finish();
}

#[cfg(feature = "parquet")]
fn w11(c: &mut Criterion) {
    let rt = workloads::runtime();
    let dir = tempfile::tempdir().expect("a temporary directory");
    workloads::generate_d5(dir.path(), 4, 2048).expect("D5 written");
    let file = workloads::d5_file(dir.path()).expect("D5");
    let file = file.display().to_string();
    let mut group = c.benchmark_group("W11_parquet");
    group.throughput(Throughput::Elements(4 * 2048));
    group.sample_size(20);
    group.bench_function("rows", |b| {
        b.to_async(&rt)
            .iter(|| workloads::w11_parquet(file.clone(), "W11"))
    });
    group.finish();
}

#[cfg(not(feature = "parquet"))]
fn w11(_: &mut Criterion) {}

criterion_group!(benches, w2, w6, indexed, w11);
criterion_main!(benches);
