#!/usr/bin/env python3
"""W12's peers on D7 (WORKLOADS.md): h5py reading slices of 64 rows of `/scenes/points` with
the same rows of `/scenes/labels` from the 8 files, every value summed; (a) in process, a
generator over (file, slice) as a `tf.data.Dataset.from_generator` would run it, and (b) in a
PyTorch `DataLoader` with 2 workers (a map-style dataset, one slice per item, each worker
keeping its files open; the main process on one torch thread), when torch is installed. Prints one JSON line per figure, as
examples/workloads.rs does.

    .venv/bin/python scripts/peers_w12.py DIR        # DIR/hdf5/scenes-NN.h5

Write D7 with `python scripts/make_d7.py DIR`. Each figure is the median of 3 passes after one
untimed warm-up pass (page cache); each DataLoader pass starts its workers, as an epoch does.
"""

import glob
import json
import os
import statistics
import sys
import time

import h5py
import numpy as np

ROWS = 64


def units(files):
    """(file index, first row) of every 64-row slice, interleaved across files as
    streamload's blocks are (slice 0 of every file, then slice 1, ...)."""
    counts = []
    for path in files:
        with h5py.File(path, "r") as f:
            counts.append(f["scenes/points"].shape[0])
    out = []
    for s in range(0, max(counts), ROWS):
        for k, n in enumerate(counts):
            if s < n:
                out.append((k, s))
    return out


class Slices:
    """The slices as a map-style dataset: item i is (points, labels) of unit i; each process
    opens the files once."""

    def __init__(self, files):
        self.files = files
        self.units = units(files)
        self.open = None

    def __len__(self):
        return len(self.units)

    def __getitem__(self, i):
        if self.open is None:
            self.open = [h5py.File(p, "r") for p in self.files]
        k, s = self.units[i]
        f = self.open[k]
        return f["scenes/points"][s:s + ROWS], f["scenes/labels"][s:s + ROWS]


def generator_pass(files):
    data = Slices(files)
    rows, total = 0, 0.0
    for i in range(len(data)):
        points, labels = data[i]
        total += float(points.sum()) + float(labels.sum())
        rows += points.shape[0]
    assert np.isfinite(total)
    return rows


def loader_pass(files):
    import torch

    # The main process only sums: torch's intra-op threads there (one per core by default)
    # would compete with the 2 workers for the 2 cores (2.5x slower when measured).
    torch.set_num_threads(1)
    loader = torch.utils.data.DataLoader(Slices(files), batch_size=None, num_workers=2,
                                         prefetch_factor=4)
    rows, total = 0, 0.0
    for points, labels in loader:
        total += float(points.sum()) + float(labels.sum())
        rows += points.shape[0]
    assert np.isfinite(total)
    return rows


def measure(name, system, run, files):
    run(files)
    rates, seconds = [], []
    for _ in range(3):
        started = time.perf_counter()
        rows = run(files)
        s = time.perf_counter() - started
        rates.append(rows / s)
        seconds.append(s)
    median = statistics.median(rates)
    print(json.dumps({
        "system": system, "workload": name,
        "figure": round(median, 3), "unit": "rows/s",
        "seconds": round(seconds[rates.index(median)], 3),
        "min": round(min(rates), 3), "max": round(max(rates), 3),
        "mbs": round(median * 12288 / 1e6, 1),
    }), flush=True)


def main():
    files = sorted(glob.glob(os.path.join(sys.argv[1], "hdf5", "scenes-*.h5")))
    assert len(files) == 8, f"D7's 8 files, found {len(files)}"
    which = sys.argv[2].split(",") if len(sys.argv) > 2 else ["generator", "loader"]
    h5 = f"h5py {h5py.__version__} (HDF5 {h5py.version.hdf5_version})"
    if "generator" in which:
        measure("W12/h5py", h5, generator_pass, files)
    if "loader" in which:
        try:
            import torch
        except ImportError:
            print("W12/h5py-dataloader: skipped (torch is not installed)", file=sys.stderr)
        else:
            measure("W12/h5py-dataloader", f"{h5} + torch {torch.__version__} DataLoader, 2 workers",
                    loader_pass, files)


if __name__ == "__main__":
    main()
