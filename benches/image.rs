//! Criterion bench of W5 (WORKLOADS.md): JPEG files -> shuffle -> parallel decode and resize
//! -> seeded random augmentation -> batch(32) -> prefetch(1), on a smaller D2 (256 JPEGs of
//! 256x256) generated once into a temporary directory; beside it the ceiling, one core
//! decoding the same JPEGs from memory.
//!
//! `cargo bench --bench image`. `examples/workloads.rs --generate DIR --only D2` writes the
//! full-size D2, and `--data DIR --only W5` runs it. W5b's decoders and pipeline on a small D6
//! too (`--only D6`, `--only W5b` for the full-size one).

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

/// W5b's work on a smaller D6 (64 JPEGs of 500x375): the pipeline, and one core decoding
/// from memory in full, a half-area crop, at 1/2 and 1/4 scale, and the fused
/// random-resized-crop transform.
fn w5b(c: &mut Criterion) {
    const D6: usize = 64;
    let rt = workloads::runtime();
    let dir = tempfile::tempdir().expect("a temporary directory");
    rt.block_on(workloads::generate_d6(dir.path(), D6))
        .expect("D6 written");
    let items = workloads::d6_files(dir.path()).expect("D6 files");
    let jpegs: Vec<Vec<u8>> = items
        .iter()
        .map(|(path, _)| std::fs::read(path).expect("a JPEG"))
        .collect();
    let mut group = c.benchmark_group("W5b_image");
    group.throughput(Throughput::Elements(D6 as u64));
    group.sample_size(10);
    group.bench_function("pipeline", |b| {
        b.to_async(&rt).iter(|| workloads::w5b_image(items.clone()))
    });
    use streamload::image;
    group.bench_function("decode_full_one_core", |b| {
        b.iter(|| {
            for j in &jpegs {
                std::hint::black_box(image::decode_jpeg(j).expect("decoded"));
            }
        })
    });
    group.bench_function("decode_crop_one_core", |b| {
        b.iter(|| {
            for j in &jpegs {
                let crop = image::decode_and_crop_jpeg(j, [56, 75, 262, 350]).expect("decoded");
                std::hint::black_box(crop);
            }
        })
    });
    for ratio in [2, 4] {
        group.bench_function(format!("decode_1_{ratio}_one_core"), |b| {
            b.iter(|| {
                for j in &jpegs {
                    std::hint::black_box(image::decode_jpeg_scaled(j, ratio).expect("decoded"));
                }
            })
        });
    }
    let train = image::RandomResizedCrop::new(224, 224);
    group.bench_function("random_resized_crop_one_core", |b| {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        b.iter(|| {
            for j in &jpegs {
                std::hint::black_box(train.apply(j, &mut rng).expect("transformed"));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, w5, w5b);
criterion_main!(benches);
