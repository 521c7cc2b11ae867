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

/// W3's parse alone, on D1's records in memory (warm): `parse_example` of batches of 256
/// (what the Python package's `batch(256).parse_example(spec)` runs) beside
/// `parse_single_example_view` of each record (what the Rust W3 runs).
fn parse(c: &mut Criterion) {
    use futures::StreamExt;
    use streamload::format::{
        FeatureSpec, ParseSpec, TFRecordDataset, parse_example, parse_single_example_view,
    };
    use streamload::tensor::DType;
    let rt = workloads::runtime();
    let dir = tempfile::tempdir().expect("a temporary directory");
    rt.block_on(workloads::generate_d1(dir.path(), 1, 2048))
        .expect("D1 written");
    let files = workloads::d1_files(dir.path(), false).expect("D1 files");
    let records: Vec<bytes::Bytes> = rt.block_on(async {
        let mut stream = TFRecordDataset::new(&files).build().iter();
        let mut records = Vec::new();
        while let Some(record) = stream.next().await {
            records.push(record.expect("a record"));
        }
        records
    });
    let spec = ParseSpec::new([
        ("image", FeatureSpec::fixed_len([], DType::String)),
        ("label", FeatureSpec::fixed_len([], DType::Int64)),
        ("weights", FeatureSpec::fixed_len([16], DType::Float32)),
    ])
    .expect("a spec");
    let mut group = c.benchmark_group("W3_parse");
    group.throughput(Throughput::Elements(records.len() as u64));
    group.bench_function("parse_example_batches_of_256", |b| {
        b.iter(|| {
            for batch in records.chunks(256) {
                std::hint::black_box(parse_example(batch, &spec).expect("parsed"));
            }
        })
    });
    group.bench_function("parse_single_example_view", |b| {
        b.iter(|| {
            for record in &records {
                let example = parse_single_example_view(record, &spec).expect("parsed");
                let weights: Vec<f32> = example.floats("weights").expect("weights").collect();
                std::hint::black_box((example.bytes("image").expect("image").next(), weights));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, w2, w6, indexed, w11, parse);
criterion_main!(benches);
