//! Criterion bench of W5 (WORKLOADS.md): JPEG files -> shuffle -> parallel decode and resize
//! -> seeded random augmentation -> batch(32) -> prefetch(1), on a smaller D2 (256 JPEGs of
//! 256x256) generated once into a temporary directory; beside it the ceiling, one core
//! decoding the same JPEGs from memory.
//!
//! `cargo bench --bench image`. `examples/workloads.rs --generate DIR --only D2` writes the
//! full-size D2, and `--data DIR --only W5` runs it.

#[path = "support/workloads.rs"]
mod workloads;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const IMAGES: usize = 256;

fn w5(c: &mut Criterion) {
    let rt = workloads::runtime();
    let dir = tempfile::tempdir().expect("a temporary directory");
    rt.block_on(workloads::generate_d2(dir.path(), IMAGES))
        .expect("D2 written");
    let items = workloads::d2_files(dir.path()).expect("D2 files");
    let jpegs: Vec<Vec<u8>> = items
        .iter()
        .map(|(path, _)| std::fs::read(path).expect("a JPEG"))
        .collect();

    let mut group = c.benchmark_group("W5_image");
    group.throughput(Throughput::Elements(IMAGES as u64));
    group.sample_size(20);
    group.bench_function("pipeline", |b| {
        b.to_async(&rt).iter(|| workloads::w5_image(items.clone()))
    });
    group.bench_function("decode_one_core", |b| {
        b.iter(|| workloads::w5_decode_one_core(&jpegs).expect("decoded"))
    });
    group.bench_function("decode_resize_one_core", |b| {
        b.iter(|| workloads::w5_decode_resize_one_core(&jpegs).expect("decoded"))
    });
    group.finish();
}

criterion_group!(benches, w5);
criterion_main!(benches);
