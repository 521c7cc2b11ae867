#!/usr/bin/env python3
"""W13's peer on D8 (WORKLOADS.md): zarr-python reading chunk-aligned slices of 64 rows of
`points` (one inner chunk of a shard each) and summing every value; and the same rows read a
whole shard (512 rows) at a time, cut into 64-row slices (zarr-python decodes a shard's inner
chunks concurrently). Prints one JSON line per figure, as examples/workloads.rs does.

    .venv-zarr/bin/python scripts/peers_w13.py DIR        # DIR/zarr/scenes.zarr

Write D8 with `python scripts/make_d8.py DIR`. Each figure is the median of 3 passes after
one untimed warm-up pass (page cache). zarr-python 3.1.6 when these figures were taken.
"""

import json
import os
import statistics
import sys
import time

import zarr


def slices_pass(points, step):
    rows, total = 0, 0.0
    for start in range(0, points.shape[0], step):
        block = points[start:start + step]
        for s in range(0, block.shape[0], 64):
            total += float(block[s:s + 64].sum())
        rows += block.shape[0]
    return rows


def main():
    store = os.path.join(sys.argv[1], "zarr", "scenes.zarr")
    points = zarr.open_array(store, path="points", mode="r")
    for name, step in [("W13/zarr-python", 64), ("W13/zarr-python-shards", 512)]:
        slices_pass(points, step)
        rates, seconds = [], []
        for _ in range(3):
            started = time.perf_counter()
            rows = slices_pass(points, step)
            s = time.perf_counter() - started
            rates.append(rows / s)
            seconds.append(s)
        median = statistics.median(rates)
        print(json.dumps({
            "system": "zarr-python " + zarr.__version__, "workload": name,
            "figure": round(median, 3), "unit": "rows/s",
            "seconds": round(seconds[rates.index(median)], 3),
            "min": round(min(rates), 3), "max": round(max(rates), 3),
        }), flush=True)


if __name__ == "__main__":
    main()
