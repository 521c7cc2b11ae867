#!/usr/bin/env python3
"""W13's peer on D8 (WORKLOADS.md): zarr-python reading chunk-aligned slices of 64 rows of
`points` (one inner chunk of a shard each) and summing every value; and the same rows read a
whole shard (512 rows) at a time, cut into 64-row slices (zarr-python decodes a shard's inner
chunks concurrently); and, when it is installed, tensorstore reading the 64-row slices with 8
reads in flight (its own threads decode them). Prints one JSON line per figure, as
examples/workloads.rs does.

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


def tensorstore_pass(store, in_flight=8):
    import tensorstore as ts
    points = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": store + "/points"}},
                     read=True).result()
    n = points.shape[0]
    rows, pending = 0, []
    for start in range(0, n, 64):
        pending.append(points[start:start + 64].read())
        if len(pending) == in_flight:
            block = pending.pop(0).result()
            float(block.sum())
            rows += block.shape[0]
    for future in pending:
        block = future.result()
        float(block.sum())
        rows += block.shape[0]
    return rows


def timed(system, name, one_pass):
    one_pass()
    rates, seconds = [], []
    for _ in range(3):
        started = time.perf_counter()
        rows = one_pass()
        s = time.perf_counter() - started
        rates.append(rows / s)
        seconds.append(s)
    median = statistics.median(rates)
    print(json.dumps({
        "system": system, "workload": name,
        "figure": round(median, 3), "unit": "rows/s",
        "seconds": round(seconds[rates.index(median)], 3),
        "min": round(min(rates), 3), "max": round(max(rates), 3),
    }), flush=True)


def main():
    store = os.path.join(sys.argv[1], "zarr", "scenes.zarr")
    points = zarr.open_array(store, path="points", mode="r")
    for name, step in [("W13/zarr-python", 64), ("W13/zarr-python-shards", 512)]:
        timed("zarr-python " + zarr.__version__, name, lambda: slices_pass(points, step))
    try:
        import tensorstore  # noqa: F401
    except ImportError:
        return
    from importlib.metadata import version
    timed("tensorstore " + version("tensorstore"), "W13/tensorstore",
          lambda: tensorstore_pass(store))


if __name__ == "__main__":
    main()
