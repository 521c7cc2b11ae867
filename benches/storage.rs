//! Criterion bench of object storage: W8 from WORKLOADS.md, 32 TFRecord shards of 4 MiB on
//! a local S3 server (s3s over objects in memory, SigV4 checked) behind a proxy adding 50 ms
//! before each response's first byte, read with interleave cycle_length 1 and 16. W8's
//! figure is the speedup: c1's time over c16's. `examples/workloads.rs --only W8` prints
//! the same workload (cycles 1, 4, 8, 16) as JSON lines.

#[path = "support/workloads.rs"]
mod workloads;

use std::time::Duration;

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};

fn w8(c: &mut Criterion) {
    let rt = workloads::runtime();
    let bucket = rt
        .block_on(workloads::w8_setup(Duration::from_millis(50)))
        .expect("W8's bucket");
    let mut group = c.benchmark_group("W8_object_storage");
    group.throughput(Throughput::Bytes(bucket.bytes));
    // c1 takes ~2 s a pass: ten samples of one pass each keep the bench near a minute.
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    for cycle in [1, 16] {
        let seconds = if cycle == 1 { 15 } else { 4 };
        group.measurement_time(Duration::from_secs(seconds));
        let files = bucket.files.clone();
        group.bench_function(format!("c{cycle}"), |b| {
            b.to_async(&rt)
                .iter(|| workloads::w8_read(&files, cycle, false))
        });
    }
    group.finish();
}

criterion_group!(benches, w8);
criterion_main!(benches);
