#!/usr/bin/env python3
"""WORKLOADS.md's D7: `DIR/hdf5/scenes-NN.h5` (00..07), 8 HDF5 files written by h5py (default
file settings, `track_times=False`), each with `/scenes/points` (float32 [10,240, 1024, 3],
chunked (64, 1024, 3), shuffle + gzip level 4) and `/scenes/labels` (int64 [10,240],
contiguous). File k's values are drawn as WORKLOADS.md says (`make_d8.py`'s `d7_file`, the
same draws D8 concatenates).

    python scripts/make_d7.py DIR     # needs numpy and h5py
"""

import os
import sys

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_d8 import d7_file  # noqa: E402  (the one definition of D7's draws)


def main():
    out = os.path.join(sys.argv[1], "hdf5")
    os.makedirs(out, exist_ok=True)
    for k in range(8):
        points, labels = d7_file(k)
        path = os.path.join(out, f"scenes-{k:02d}.h5")
        with h5py.File(path, "w") as f:
            group = f.create_group("scenes", track_order=False)
            group.create_dataset("points", data=points, chunks=(64, points.shape[1], 3),
                                 shuffle=True, compression="gzip", compression_opts=4,
                                 track_times=False)
            group.create_dataset("labels", data=labels.astype("<i8"), track_times=False)
        print(f"{path} written", flush=True)


if __name__ == "__main__":
    main()
