//! Criterion benches of the core engine: W1 (per-element overhead), W4 (CPU-bound map
//! scaling) and W7 (a slow generator made parallel), as defined in WORKLOADS.md.
//!
//! `cargo bench --bench engine`. The element counts are smaller than the workload file's so
//! a sample stays short; `examples/workloads.rs` runs the full sizes and prints JSON lines.

#[path = "support/workloads.rs"]
mod workloads;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use streamload::available_cores;

fn w1(c: &mut Criterion) {
    let rt = workloads::runtime();
    let n = 2_000_000;
    let mut group = c.benchmark_group("W1_overhead");
    group.throughput(Throughput::Elements(n as u64));
    group.bench_function("range_map_filter_batch_prefetch", |b| {
        b.to_async(&rt).iter(|| workloads::w1_overhead(n))
    });
    group.finish();
}

fn w4(c: &mut Criterion) {
    let rt = workloads::runtime();
    let n = 400;
    let mut group = c.benchmark_group("W4_cpu_map");
    group.sample_size(10);
    group.throughput(Throughput::Elements(n as u64));
    for p in [1, available_cores()] {
        group.bench_function(format!("p{p}"), |b| {
            b.to_async(&rt).iter(|| workloads::w4_cpu_map(n, p))
        });
    }
    group.finish();
}

fn w7(c: &mut Criterion) {
    let rt = workloads::runtime();
    let n = 1_000;
    let mut group = c.benchmark_group("W7_generator");
    group.sample_size(10);
    group.throughput(Throughput::Elements(n as u64));
    group.bench_function("a_generator", |b| {
        b.to_async(&rt).iter(|| workloads::w7_generator(n))
    });
    group.bench_function("b_index_generator_parallel_map", |b| {
        b.to_async(&rt)
            .iter(|| workloads::w7_index_generator_parallel_map(n))
    });
    group.finish();
}

criterion_group!(benches, w1, w4, w7);
criterion_main!(benches);
