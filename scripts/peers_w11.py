#!/usr/bin/env python3
"""W11's peers on D5 (WORKLOADS.md): pyarrow's `iter_batches` to numpy, and Hugging Face
`datasets` streaming, both projecting `label` and `weights` in batches of 256 rows as arrays
(int64 [256], float32 [256, 16]). Prints one JSON line per figure, as examples/workloads.rs
does.

    /work/venv/bin/python scripts/peers_w11.py DIR        # DIR/parquet/train.parquet

Write D5 with `cargo run --release --example workloads --features parquet -- --generate DIR
--only D5`. Each figure is the median of 3 passes after one untimed warm-up pass (page cache).
pyarrow 26.0.1, datasets 5.2.0 when WORKLOADS.md's reference figures were taken.
"""

import json
import os
import statistics
import sys
import time

import numpy as np
import pyarrow.parquet as pq

BATCH = 256
COLUMNS = ["label", "weights"]


def pyarrow_pass(path, use_threads):
    rows = 0
    f = pq.ParquetFile(path)
    for batch in f.iter_batches(batch_size=BATCH, columns=COLUMNS, use_threads=use_threads):
        label = batch.column(0).to_numpy()
        weights = batch.column(1).flatten().to_numpy().reshape(-1, 16)
        assert label.dtype == np.int64 and weights.dtype == np.float32
        rows += len(label)
    return rows


def hf_pass(path):
    import datasets

    ds = datasets.load_dataset("parquet", data_files=path, split="train", streaming=True)
    ds = ds.select_columns(COLUMNS).with_format("numpy")
    rows = 0
    for batch in ds.iter(batch_size=BATCH):
        label = batch["label"]
        weights = np.asarray(batch["weights"], dtype=np.float32).reshape(-1, 16)
        rows += len(label)
        assert weights.shape[0] == len(label)
    return rows


def timed(name, unit, run):
    run()  # warm-up: page cache, imports
    passes = []
    for _ in range(3):
        start = time.perf_counter()
        rows = run()
        seconds = time.perf_counter() - start
        passes.append((rows / seconds, seconds))
    passes.sort()
    rate, seconds = passes[1]
    print(
        json.dumps(
            {
                "system": name,
                "workload": "W11",
                "figure": round(rate, 3),
                "unit": unit,
                "seconds": round(seconds, 3),
                "passes": 3,
                "min": round(passes[0][0], 3),
                "max": round(passes[-1][0], 3),
            }
        ),
        flush=True,
    )


def main():
    path = os.path.join(sys.argv[1], "parquet", "train.parquet")
    timed("pyarrow (use_threads=True)", "rows/s", lambda: pyarrow_pass(path, True))
    timed("pyarrow (use_threads=False)", "rows/s", lambda: pyarrow_pass(path, False))
    timed("hf-datasets (streaming)", "rows/s", lambda: hf_pass(path))


if __name__ == "__main__":
    main()
