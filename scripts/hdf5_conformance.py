#!/usr/bin/env python3
"""HDF5 conformance files for streamload's reader (tests/hdf5.rs).

Writes, under tests/data/hdf5/, small files as h5py writes them:
- types.h5: one dataset per numeric dtype (int8..int64, uint8..uint64, float16/32/64, and
  big-endian int32/float64), shape (23, 3), under /contiguous (contiguous layout) and
  /chunked (chunks of (5, 2): the last chunk along each axis is partial), each holding the
  dtype's extremes; fixed-length strings (/strings/ascii, null-padded, 8 bytes; and
  /strings/space, space-padded as Fortran writes them; /strings/vlen, variable-length UTF-8,
  h5py's default for `str`); a compound dataset (/compound:
  fields x float32, y int64, name 6-byte string, in rows); a dataset written in parts
  (/partial: two of its four chunks never written, read as the fill value -1); attributes
  on a group.
- filters.h5: the same float32 array (40, 4, 5) chunked (6, 4, 5) under each filter
  pipeline h5py users write: gzip, shuffle+gzip, fletcher32, shuffle+gzip+fletcher32, lzf,
  shuffle+lzf; and an int16 one with scaleoffset-free shuffle alone.
- scenes-0.h5, scenes-1.h5: the issue's layout, /scenes/points float32 (N, 16, 3) chunked
  (8, 16, 3) with shuffle+gzip, /scenes/labels int64 (N,), N = 50 and 37.
- expected.json: what h5py reads back for every dataset: its dtype, shape, chunks,
  filters, and values in row-major order (strings decoded as h5py shows them without
  padding, compound fields each as a list), so the Rust tests compare without Python.

Run with a venv holding h5py and numpy (h5py 3.16, HDF5 2.0, numpy 2.4 made the files
checked in): `python scripts/hdf5_conformance.py`. Deterministic: the same values on every
run (the files' bytes may differ between HDF5 versions, their contents do not).
"""

import json
import os

import h5py
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "hdf5")

NUMERIC = [
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
    ">i4", ">f8",
]


def name_of(dtype):
    return {">i4": "int32be", ">f8": "float64be"}.get(dtype, dtype)


def numeric_values(dtype, shape):
    """Values spanning the dtype: its extremes, zero, and a ramp (exact in the type)."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    if dt.kind in "iu":
        info = np.iinfo(dt)
        ramp = [(i * 37) % 101 - (50 if dt.kind == "i" else 0) for i in range(n)]
        ramp[0], ramp[1], ramp[2] = int(info.min), int(info.max), 0
        return np.array(ramp, dtype=dt).reshape(shape)
    # Floats: multiples of 1/8 within the type's exact range, plus its largest value.
    ramp = [((i * 37) % 101 - 50) / 8.0 for i in range(n)]
    ramp[1] = float(np.finfo(dt).max)
    ramp[2] = float(np.finfo(dt).tiny)
    return np.array(ramp, dtype=dt).reshape(shape)


def jsonable(values):
    if values.dtype.kind == "f":
        return [float(v) for v in values.ravel()]
    if values.dtype.kind in "iu":
        return [int(v) for v in values.ravel()]
    raise ValueError(values.dtype)


def describe(ds, values, **extra):
    entry = {
        "dtype": name_of(ds.dtype.str if ds.dtype.byteorder == ">" else ds.dtype.name),
        "shape": list(ds.shape),
        "chunks": list(ds.chunks) if ds.chunks else None,
        "filters": sorted(k for k in ("gzip", "shuffle", "fletcher32", "lzf")
                          if ds.compression == k or getattr(ds, k, False) is True),
        "values": values,
    }
    entry.update(extra)
    return entry


def write_types(expected):
    path = os.path.join(OUT, "types.h5")
    shape = (23, 3)
    with h5py.File(path, "w") as f:
        for dtype in NUMERIC:
            data = numeric_values(dtype, shape)
            for layout in ("contiguous", "chunked"):
                chunks = (5, 2) if layout == "chunked" else None
                ds = f.create_dataset(f"{layout}/{name_of(dtype)}", data=data, chunks=chunks)
                read = ds[...]
                assert np.array_equal(read, data)
                expected[f"types.h5:{ds.name}"] = describe(ds, jsonable(read))
        words = np.array([f"w{i:02d}" + "x" * (i % 5) for i in range(20)], dtype="S8")
        ds = f.create_dataset("strings/ascii", data=words, chunks=(6,))
        expected["types.h5:/strings/ascii"] = describe(
            ds, [w.decode() for w in ds[...]], dtype="S8")
        # Variable-length UTF-8 strings: h5py's default for `str` data.
        texts = [f"label {i}" + " é" * (i % 3) for i in range(15)]
        ds = f.create_dataset("strings/vlen", data=texts, dtype=h5py.string_dtype(), chunks=(4,))
        expected["types.h5:/strings/vlen"] = describe(
            ds, [t.decode() for t in ds[...]], dtype="vlen-utf8")
        # Space-padded fixed-length strings (H5T_STR_SPACEPAD), as Fortran and MATLAB write.
        tid = h5py.h5t.C_S1.copy()
        tid.set_size(5)
        tid.set_strpad(h5py.h5t.STR_SPACEPAD)
        space = h5py.h5s.create_simple((4,))
        dset = h5py.h5d.create(f.id, b"strings/space", tid, space)
        padded = np.array([b"a    ", b"bb   ", b"ccc  ", b"ddddd"], dtype="S5")
        dset.write(h5py.h5s.ALL, h5py.h5s.ALL, padded)
        expected["types.h5:/strings/space"] = {
            "dtype": "S5", "shape": [4], "chunks": None, "filters": [],
            "values": ["a", "bb", "ccc", "ddddd"],
        }
        compound = np.dtype([("x", "<f4"), ("y", "<i8"), ("name", "S6")])
        rows = np.array(
            [(i / 4.0, -(i ** 3), f"n{i}".encode()) for i in range(30)], dtype=compound)
        ds = f.create_dataset("compound", data=rows, chunks=(7,), compression="gzip")
        read = ds[...]
        expected["types.h5:/compound"] = describe(ds, None, dtype="compound", fields={
            "x": [float(v) for v in read["x"]],
            "y": [int(v) for v in read["y"]],
            "name": [v.decode() for v in read["name"]],
        })
        # Written in parts: chunks 1 and 3 (rows 5..10, 15..20) never written, read as the
        # fill value.
        ds = f.create_dataset("partial", shape=(20, 4), chunks=(5, 4), dtype="<f4",
                              fillvalue=-1.0)
        ds[0:5] = np.arange(20, dtype="<f4").reshape(5, 4)
        ds[10:15] = np.arange(20, 40, dtype="<f4").reshape(5, 4)
        expected["types.h5:/partial"] = describe(ds, jsonable(ds[...]))
        f["chunked"].attrs["note"] = "chunks of (5, 2)"
        f["chunked"].attrs["rows"] = 23


FILTERS = {
    "gzip": dict(compression="gzip", compression_opts=4),
    "shuffle_gzip": dict(compression="gzip", shuffle=True),
    "fletcher32": dict(fletcher32=True),
    "shuffle_gzip_fletcher32": dict(compression="gzip", shuffle=True, fletcher32=True),
    "lzf": dict(compression="lzf"),
    "shuffle_lzf": dict(compression="lzf", shuffle=True),
}


def write_filters(expected):
    path = os.path.join(OUT, "filters.h5")
    shape = (40, 4, 5)
    # Compressible but not constant: a slow ramp in eighths.
    data = (np.arange(np.prod(shape)) // 3 % 64 / 8.0).astype("<f4").reshape(shape)
    with h5py.File(path, "w") as f:
        for name, opts in FILTERS.items():
            ds = f.create_dataset(name, data=data, chunks=(6, 4, 5), **opts)
            read = ds[...]
            assert np.array_equal(read, data)
            expected[f"filters.h5:/{name}"] = describe(ds, jsonable(read))
        ints = numeric_values("int16", (40, 7))
        ds = f.create_dataset("shuffle_int16", data=ints, chunks=(9, 7), shuffle=True)
        expected["filters.h5:/shuffle_int16"] = describe(ds, jsonable(ds[...]))


def write_scenes(expected):
    for i, rows in enumerate([50, 37]):
        path = os.path.join(OUT, f"scenes-{i}.h5")
        base = i * 1000
        points = (np.arange(rows * 16 * 3) % 97 / 4.0 + base).astype("<f4")
        points = points.reshape(rows, 16, 3)
        labels = np.arange(base, base + rows, dtype="<i8")
        with h5py.File(path, "w") as f:
            f.create_dataset("scenes/points", data=points, chunks=(8, 16, 3),
                             compression="gzip", shuffle=True)
            f.create_dataset("scenes/labels", data=labels)
            f["scenes"].attrs["source"] = f"run {i}"
            expected[f"scenes-{i}.h5:/scenes/points"] = describe(
                f["scenes/points"], jsonable(f["scenes/points"][...]))
            expected[f"scenes-{i}.h5:/scenes/labels"] = describe(
                f["scenes/labels"], jsonable(f["scenes/labels"][...]))


def main():
    os.makedirs(OUT, exist_ok=True)
    expected = {}
    write_types(expected)
    write_filters(expected)
    write_scenes(expected)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump({"h5py": h5py.__version__, "hdf5": h5py.version.hdf5_version,
                   "datasets": expected}, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
