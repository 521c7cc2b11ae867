//! Criterion benches of the file formats: W2 (raw TFRecord read, plain and GZIP) and W3
//! (read, shuffle, parse Examples in parallel, batch) from
//! WORKLOADS.md, on a smaller D1 (4 shards of 2,048 records, ~35 MB) generated once into a
//! temporary directory. `examples/workloads.rs --generate DIR` makes the full-size data.

#[path = "support/workloads.rs"]
mod workloads;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn w2(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
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
}

criterion_group!(benches, w2);
criterion_main!(benches);
