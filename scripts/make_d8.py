#!/usr/bin/env python3
"""WORKLOADS.md's D8: `DIR/zarr/scenes.zarr`, a Zarr v3 group written by zarr-python with
`points` (D7's points, the 8 files' rows concatenated in order: float32 [81,920, 1024, 3],
shards (512, 1024, 3) of inner chunks (64, 1024, 3), bytes + zstd level 3 inside, the index
checksummed with crc32c at the end) and `labels` (int64 [81,920], chunks (512,), zstd 3).

D7's values are drawn here as WORKLOADS.md says (file k from numpy.random.default_rng(7000 + k),
10,240 rows each), without writing the HDF5 files.

    python scripts/make_d8.py DIR     # needs numpy and zarr (3.1)
"""

import os
import sys

import numpy as np
import zarr
from zarr.codecs import ZstdCodec

ROWS, POINTS = 10_240, 1024


def d7_file(k):
    """File k's points and labels, as D7 draws them."""
    rng = np.random.default_rng(7000 + k)
    n = ROWS
    centre = rng.uniform(-8, 8, (n, 3))
    radius = rng.uniform(0.5, 3, (n, 1))
    freq = rng.uniform(1, 5, (n, 3))
    phase = rng.uniform(0, 2 * np.pi, (n, 3))
    t = np.linspace(0, 1, POINTS)
    points = np.empty((n, POINTS, 3), dtype=np.float32)
    for c in range(3):
        points[:, :, c] = (centre[:, c:c + 1]
                           + radius * np.sin(2 * np.pi * freq[:, c:c + 1] * t + phase[:, c:c + 1]))
    noise = rng.normal(0, 0.01, (n, POINTS, 3)).astype(np.float32)
    points = np.round((points + noise) * 1024) / 1024
    points = points.astype(np.float32)
    outliers = rng.random((n, POINTS)) < 0.125
    m = int(outliers.sum())
    points[outliers] = rng.uniform(-12, 12, (m, 3)).astype(np.float32)
    labels = rng.integers(0, 1000, n)
    return points, labels


def main():
    out = os.path.join(sys.argv[1], "zarr", "scenes.zarr")
    root = zarr.open_group(out, mode="w", zarr_format=3)
    points = root.create_array("points", shape=(8 * ROWS, POINTS, 3), dtype="<f4",
                               chunks=(64, POINTS, 3), shards=(512, POINTS, 3),
                               compressors=[ZstdCodec(level=3)])
    labels = root.create_array("labels", shape=(8 * ROWS,), dtype="<i8", chunks=(512,),
                               compressors=[ZstdCodec(level=3)])
    for k in range(8):
        p, l = d7_file(k)
        points[k * ROWS:(k + 1) * ROWS] = p
        labels[k * ROWS:(k + 1) * ROWS] = l
        print(f"file {k} written", flush=True)


if __name__ == "__main__":
    main()
