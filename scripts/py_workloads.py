#!/usr/bin/env python3
"""WORKLOADS.md's W3 and W5b, and the seeds' generator recipe (W7's shape), from Python
through the `streamload` package, to set beside the Rust figures
(`cargo run --release --example workloads -- --data DIR --only W3,W5b`) and the peers
(`scripts/tf_w3.py`, `scripts/tf_w5b.py`, `scripts/torch_w5b.py`) in one run:

    (cd python && maturin develop --release)      # a release build of the extension
    python scripts/py_workloads.py DIR [--only W3,W5b,gen]

DIR is `workloads --generate DIR` (D1 for W3, D6 for W5b). Prints one JSON line per figure
(`{"system": "streamload-python", "workload": ..., "figure": ..., "unit": ...}`), each the
median of 3 passes after an untimed one, with the passes.

- W3: D1 -> TFRecordDataset(num_parallel_reads=4) -> shuffle(10,000) -> batch(256) ->
  parse_example (the batch at once, num_parallel_calls=AUTOTUNE) -> prefetch(AUTOTUNE);
  `W3/packed`: the same with `strings="packed"` (each batch's 256 images as one buffer
  and offsets, not 256 `bytes`); `W3/view`: with `strings="view"` (the images handed over
  as views of the parsed records, not copied: what the Rust W3's consumer gets);
  `W3/one-parse-thread`: parse_example without
  num_parallel_calls (one batch at a time); `W3/no-image`: W3 without the `image` feature;
  `W3/packed-no-shuffle`: W3/packed without the shuffle; `W3/per-record`: parse_example
  on each record before batch (WORKLOADS.md's order), AUTOTUNE.
- W5b: D6's (file, label) -> shuffle(1000) -> io.read_file -> image.RandomResizedCrop(224)
  (decode-and-crop, resize, flip, ImageNet normalisation, one pass) -> batch(64) ->
  prefetch(AUTOTUNE); both maps AUTOTUNE.
- gen: a generator whose every element costs ~4 ms of work that releases the GIL
  (hashlib over a buffer), read by one instance and by two (interleave of two generators,
  num_parallel_calls=2): `gen/gil-free-2x` is their ratio; the same with ~4 ms of pure
  Python work: `gen/pure-python-2x`.
"""

import argparse
import glob
import hashlib
import json
import os
import resource
import statistics
import time

import numpy as np

import streamload as sl


def emit(workload, figure, unit, passes):
    print(json.dumps({"system": "streamload-python", "workload": workload,
                      "figure": round(figure, 3), "unit": unit,
                      "passes": [round(p, 1) for p in passes]}), flush=True)


def cpu_seconds():
    """This process's CPU time so far, every thread's, user and system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


#: The CPU time per element of the last `timed` passes, in microseconds.
last_cpu = [0.0]


def timed(ds, count, passes=3):
    count(ds)  # untimed: warms the page cache and the threads
    rates = []
    cpu, total = cpu_seconds(), 0
    for _ in range(passes):
        start = time.perf_counter()
        n = count(ds)
        rates.append(n / (time.perf_counter() - start))
        total += n
    last_cpu[0] = (cpu_seconds() - cpu) / max(total, 1) * 1e6
    return statistics.median(rates), rates


def w3(d):
    files = sorted(glob.glob(os.path.join(d, "tfrecord", "*.tfrecord")))
    spec = {
        "image": sl.FixedLenFeature([], sl.string),
        "label": sl.FixedLenFeature([], sl.int64),
        "weights": sl.FixedLenFeature([16], sl.float32),
    }
    options = sl.Options()
    options.deterministic = False  # W3's reads are nondeterministic (interleave, 4 at once)

    def count(ds):
        return sum(len(b["label"]) for b in ds)

    def pipeline(shuffle=True, features=spec, **parse):
        ds = sl.TFRecordDataset(files, num_parallel_reads=4)
        if shuffle:
            ds = ds.shuffle(10_000, seed=3)
        return (ds.batch(256).parse_example(features, **parse).prefetch(sl.AUTOTUNE)
                .with_options(options))

    # The Rust W3 parses on every core (`try_map_parallel`): so does this, AUTOTUNE.
    median, passes = timed(pipeline(num_parallel_calls=sl.AUTOTUNE), count)
    emit("W3", median, "records/s", passes)
    emit("W3/cpu-per-record", last_cpu[0], "microseconds", [])
    median, passes = timed(pipeline(num_parallel_calls=sl.AUTOTUNE, strings="packed"), count)
    emit("W3/packed", median, "records/s", passes)
    emit("W3/packed/cpu-per-record", last_cpu[0], "microseconds", [])
    median, passes = timed(pipeline(num_parallel_calls=sl.AUTOTUNE, strings="view"), count)
    emit("W3/view", median, "records/s", passes)
    emit("W3/view/cpu-per-record", last_cpu[0], "microseconds", [])
    median, passes = timed(pipeline(), count)
    emit("W3/one-parse-thread", median, "records/s", passes)
    # Where the time goes: W3 without the images, and without the shuffle.
    no_image = {k: v for k, v in spec.items() if k != "image"}
    median, passes = timed(pipeline(features=no_image, num_parallel_calls=sl.AUTOTUNE), count)
    emit("W3/no-image", median, "records/s", passes)
    emit("W3/no-image/cpu-per-record", last_cpu[0], "microseconds", [])
    median, passes = timed(pipeline(shuffle=False, num_parallel_calls=sl.AUTOTUNE,
                                    strings="packed"), count)
    emit("W3/packed-no-shuffle", median, "records/s", passes)
    emit("W3/packed-no-shuffle/cpu-per-record", last_cpu[0], "microseconds", [])
    per_record = (sl.TFRecordDataset(files, num_parallel_reads=4).shuffle(10_000, seed=3)
                  .parse_example(spec, num_parallel_calls=sl.AUTOTUNE).batch(256)
                  .prefetch(sl.AUTOTUNE).with_options(options))
    median, passes = timed(per_record, count)
    emit("W3/per-record", median, "records/s", passes)


def w5b(d):
    labels = [int(x) for x in open(os.path.join(d, "imagenet", "labels.txt"))]
    files = [os.path.join(d, "imagenet", f"{i:05d}.jpg") for i in range(len(labels))]
    ds = (sl.Dataset.from_tensor_slices((np.array(files, dtype=object), np.array(labels)))
          .shuffle(1000, seed=5)
          .map(sl.io.read_file(key=0), num_parallel_calls=sl.AUTOTUNE)
          .map(sl.image.RandomResizedCrop(224, key=0, seed=5), num_parallel_calls=sl.AUTOTUNE)
          .batch(64)
          .prefetch(sl.AUTOTUNE))

    def count(ds):
        return sum(len(labels) for _, labels in ds)

    median, passes = timed(ds, count)
    emit("W5b", median, "images/s", passes)


def generator_recipe(n=400):
    block = os.urandom(1 << 20)

    def calibrate(work):
        start = time.perf_counter()
        for _ in range(20):
            work(1)
        return (time.perf_counter() - start) / 20

    def hashing(k):  # releases the GIL (hashlib, > 2 KiB)
        for _ in range(k):
            hashlib.sha256(block).digest()

    def python_loop(k):  # holds the GIL
        x = 0
        for i in range(k):
            x += i * i
        return x

    # Scale each to ~4 ms an element.
    reps_hash = max(1, round(0.004 / calibrate(hashing)))
    loop_1 = calibrate(lambda _: python_loop(10_000)) / 10_000
    reps_loop = max(1, round(0.004 / loop_1))

    def make(work, reps):
        def gen(count):
            for i in range(count):
                work(reps)
                yield i
        return gen

    def count(ds):
        return sum(1 for _ in ds)

    for name, gen in (("gil-free", make(hashing, reps_hash)),
                      ("pure-python", make(python_loop, reps_loop))):
        one = sl.Dataset.from_generator(gen, args=(n,))
        two = sl.Dataset.range(2).interleave(
            lambda i: sl.Dataset.from_generator(gen, args=(n // 2,)),
            cycle_length=2, num_parallel_calls=2)
        r1, p1 = timed(one, count)
        r2, p2 = timed(two, count)
        emit(f"gen/{name}-1", r1, "elements/s", p1)
        emit(f"gen/{name}-2", r2, "elements/s", p2)
        emit(f"gen/{name}-2x", r2 / r1, "ratio", [b / a for a, b in zip(p1, p2)])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir", nargs="?")
    parser.add_argument("--only", default="W3,W5b,gen")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if "W3" in only:
        w3(args.dir)
    if "W5b" in only:
        w5b(args.dir)
    if "gen" in only:
        generator_recipe()


if __name__ == "__main__":
    main()
