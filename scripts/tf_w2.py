#!/usr/bin/env python3
# tf.data's W2 and W2gz (WORKLOADS.md), to set beside
# `cargo run --release --example workloads -- --data DIR --only W2,W2gz` in the same minutes:
#   python3 -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow-cpu
#   /tmp/tfenv/bin/python scripts/tf_w2.py DIR   (DIR from `workloads --generate DIR`)
# Drained inside TensorFlow's runtime (`reduce`), so no Python runs per record.
import os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
d = sys.argv[1]
def w2(gz):
    sub, suffix = ("tfrecord-gz", ".gz") if gz else ("tfrecord", "")
    files = [os.path.join(d, sub, f"train-{i:05d}-of-00016.tfrecord{suffix}") for i in range(16)]
    ds = tf.data.Dataset.from_tensor_slices(files).interleave(
        lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP" if gz else ""),
        cycle_length=4, num_parallel_calls=4, deterministic=False)
    # Batched so the drain's per-element cost does not hide the reader's (the fastest of the
    # drains tried: per-record `reduce`, Python iteration, batch-then-reduce).
    return ds.batch(1024).reduce(
        (tf.constant(0, tf.int64), tf.constant(0, tf.int64)),
        lambda acc, r: (acc[0] + tf.cast(tf.size(r), tf.int64),
                        acc[1] + tf.reduce_sum(tf.cast(tf.strings.length(r), tf.int64))))
for name, gz in [("W2", False), ("W2gz", True)]:
    w2(gz)  # warm the page cache and the graph
    rates = []
    for _ in range(3):
        t = time.perf_counter(); n, b = w2(gz); s = time.perf_counter() - t
        assert int(n) == 131072, int(n)
        rates.append(int(b) / 1e6 / s)
    print(f"tf.data {name} MB/s:", " ".join(f"{r:.0f}" for r in rates), "median", f"{sorted(rates)[1]:.0f}")
