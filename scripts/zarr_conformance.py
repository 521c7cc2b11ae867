#!/usr/bin/env python3
"""Zarr conformance stores for streamload's reader (tests/zarr.rs).

Writes, under tests/data/zarr/, small stores as zarr-python writes them:
- v3.zarr (Zarr format 3): one array per numeric dtype (int8..int64, uint8..uint64,
  float16/32/64, bool), shape (23, 3), chunks (5, 2) (the last chunk along each axis is
  partial), zarr-python's default codecs (bytes + zstd), holding the dtype's extremes;
  under /codecs, the same float32 array (40, 4, 5) through each codec chain: blosc (lz4,
  shuffle), blosc (zstd, bitshuffle), zstd, gzip, gzip + crc32c, big-endian bytes,
  transpose, none at all, and sharded (shards (24, 4, 5) of inner chunks (6, 2, 5), gzip
  inside, the index checksummed with crc32c); /partial: two of its four chunks never
  written, read as the fill value -1 (the spec's missing chunk). /codecs/sharded_rows and
  /codecs/sharded_zstd_rows: sharded with inner chunks of whole rows (shards (12, 4, 5) of
  inner chunks (6, 4, 5), the last inner chunk partial), big-endian gzip + crc32c and
  little-endian zstd inside, fill value -1.5 in rows 6..24, so that one inner chunk is left
  out of its shard's index and one shard out of the store.
- v2.zarr (Zarr format 2): the same dtypes (and big-endian int32 and float64), compressors
  blosc (lz4), zstd, gzip and none, Fortran order, `/` as dimension separator, and
  /partial.
- scenes-0.zarr, scenes-1.zarr: the issue's layout, /points float32 (N, 16, 3) and /labels
  int64 (N,), N = 50 and 37: in scenes-0 (format 3) the points are sharded (shards of 16
  rows, inner chunks of 8, zstd), in scenes-1 (format 2) chunks of 8 rows with blosc.
- expected.json: what zarr-python reads back for every array: its dtype, shape, chunks
  (inner chunks when sharded), shards, and values in row-major order, so the Rust tests
  compare without Python.

Run with a venv holding zarr and numpy (zarr 3.1.6, numcodecs 0.16.6, numpy 2.3 made the
stores checked in): `python scripts/zarr_conformance.py`. Deterministic: the same values
on every run.
"""

import json
import os
import shutil

import numcodecs
import numpy as np
import zarr
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    TransposeCodec,
    ZstdCodec,
)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "zarr")

NUMERIC = [
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "bool",
]


def numeric_values(dtype, shape):
    """Values spanning the dtype: its extremes, zero, and a ramp (exact in the type)."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    if dt.kind == "b":
        return np.array([(i * 7) % 3 == 0 for i in range(n)]).reshape(shape)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        ramp = [(i * 37) % 101 - (50 if dt.kind == "i" else 0) for i in range(n)]
        ramp[0], ramp[1], ramp[2] = int(info.min), int(info.max), 0
        return np.array(ramp, dtype=dt).reshape(shape)
    ramp = [((i * 37) % 101 - 50) / 8.0 for i in range(n)]
    ramp[1] = float(np.finfo(dt).max)
    ramp[2] = float(np.finfo(dt).tiny)
    return np.array(ramp, dtype=dt).reshape(shape)


def jsonable(values):
    if values.dtype.kind == "f":
        return [float(v) for v in values.ravel()]
    if values.dtype.kind in "iu":
        return [int(v) for v in values.ravel()]
    if values.dtype.kind == "b":
        return [bool(v) for v in values.ravel()]
    raise ValueError(values.dtype)


def describe(array, **extra):
    read = array[...]
    shards = getattr(array, "shards", None)
    entry = {
        "dtype": str(read.dtype) if read.dtype.byteorder != ">" else read.dtype.str,
        "shape": list(array.shape),
        "chunks": list(array.chunks),
        "shards": list(shards) if shards else None,
        "values": jsonable(read),
    }
    entry.update(extra)
    return entry


def ramp3(shape):
    # Compressible but not constant: a slow ramp in eighths.
    return (np.arange(np.prod(shape)) // 3 % 64 / 8.0).astype("<f4").reshape(shape)


V3_CODECS = {
    "blosc_lz4": dict(compressors=[BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")]),
    "blosc_zstd_bitshuffle": dict(
        compressors=[BloscCodec(cname="zstd", clevel=3, shuffle="bitshuffle")]),
    "zstd": dict(compressors=[ZstdCodec(level=3)]),
    "gzip": dict(compressors=[GzipCodec(level=5)]),
    "gzip_crc32c": dict(compressors=[GzipCodec(level=5), Crc32cCodec()]),
    "big_endian": dict(serializer=BytesCodec(endian="big"), compressors=None),
    "transpose": dict(filters=[TransposeCodec(order=(2, 0, 1))], compressors=[ZstdCodec()]),
    "raw": dict(compressors=None),
    "sharded": dict(shards=(24, 4, 5), compressors=[GzipCodec()]),
}

# Sharded, inner chunks of whole rows: what streamload reads inner chunk by inner chunk.
SHARDED_ROWS = {
    "sharded_rows": dict(serializer=BytesCodec(endian="big"),
                         compressors=[GzipCodec(level=5), Crc32cCodec()]),
    "sharded_zstd_rows": dict(compressors=[ZstdCodec(level=3)]),
}


def write_v3(expected):
    path = os.path.join(OUT, "v3.zarr")
    root = zarr.open_group(path, mode="w", zarr_format=3)
    root.attrs["note"] = "written by scripts/zarr_conformance.py"
    shape = (23, 3)
    for dtype in NUMERIC:
        data = numeric_values(dtype, shape)
        array = root.create_array(dtype, shape=shape, chunks=(5, 2), dtype=dtype)
        array[...] = data
        assert np.array_equal(array[...], data)
        expected[f"v3.zarr:{dtype}"] = describe(array)
    data = ramp3((40, 4, 5))
    codecs = root.create_group("codecs")
    for name, opts in V3_CODECS.items():
        chunks = (6, 2, 5) if "shards" in opts else (6, 4, 5)
        array = codecs.create_array(name, shape=data.shape, chunks=chunks, dtype="<f4", **opts)
        array[...] = data
        assert np.array_equal(array[...], data)
        expected[f"v3.zarr:codecs/{name}"] = describe(array)
    # Rows 6..12 (an inner chunk) and 12..24 (a shard) hold only the fill value: zarr-python
    # leaves the inner chunk out of its shard's index and the shard out of the store.
    rows = data.copy()
    rows[6:24] = -1.5
    for name, opts in SHARDED_ROWS.items():
        array = codecs.create_array(name, shape=rows.shape, chunks=(6, 4, 5),
                                    shards=(12, 4, 5), dtype="<f4", fill_value=-1.5, **opts)
        array[...] = rows
        assert np.array_equal(array[...], rows)
        assert not os.path.exists(os.path.join(path, "codecs", name, "c", "1", "0", "0"))
        expected[f"v3.zarr:codecs/{name}"] = describe(array)
    write_partial(root, "v3.zarr", expected)


def write_partial(root, store, expected):
    # Written in parts: chunks 1 and 3 (rows 5..10, 15..20) never written.
    array = root.create_array("partial", shape=(20, 4), chunks=(5, 4), dtype="<f4",
                              fill_value=-1.0)
    array[0:5] = np.arange(20, dtype="<f4").reshape(5, 4)
    array[10:15] = np.arange(20, 40, dtype="<f4").reshape(5, 4)
    expected[f"{store}:partial"] = describe(array)


V2_COMPRESSORS = {
    "blosc_lz4": numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE),
    "zstd": numcodecs.Zstd(level=3),
    "gzip": numcodecs.GZip(level=5),
    "raw": None,
}


def write_v2(expected):
    path = os.path.join(OUT, "v2.zarr")
    root = zarr.open_group(path, mode="w", zarr_format=2)
    shape = (23, 3)
    for dtype in NUMERIC + [">i4", ">f8"]:
        name = {">i4": "int32be", ">f8": "float64be"}.get(dtype, dtype)
        data = numeric_values(dtype, shape)
        array = root.create_array(name, shape=shape, chunks=(5, 2), dtype=dtype)
        array[...] = data
        assert np.array_equal(array[...], data)
        expected[f"v2.zarr:{name}"] = describe(array)
    data = ramp3((40, 4, 5))
    codecs = root.create_group("codecs")
    for name, compressor in V2_COMPRESSORS.items():
        array = codecs.create_array(name, shape=data.shape, chunks=(6, 4, 5), dtype="<f4",
                                    compressors=compressor)
        array[...] = data
        expected[f"v2.zarr:codecs/{name}"] = describe(array)
    array = codecs.create_array("fortran", shape=data.shape, chunks=(6, 4, 5), dtype="<f4",
                                order="F")
    array[...] = data
    expected["v2.zarr:codecs/fortran"] = describe(array)
    array = codecs.create_array("slash", shape=data.shape, chunks=(6, 4, 5), dtype="<f4",
                                chunk_key_encoding={"name": "v2", "separator": "/"})
    array[...] = data
    expected["v2.zarr:codecs/slash"] = describe(array)
    write_partial(root, "v2.zarr", expected)


def write_scenes(expected):
    for i, rows in enumerate([50, 37]):
        store = f"scenes-{i}.zarr"
        path = os.path.join(OUT, store)
        base = i * 1000
        points = (np.arange(rows * 16 * 3) % 97 / 4.0 + base).astype("<f4")
        points = points.reshape(rows, 16, 3)
        labels = np.arange(base, base + rows, dtype="<i8")
        if i == 0:
            root = zarr.open_group(path, mode="w", zarr_format=3)
            p = root.create_array("points", shape=points.shape, chunks=(8, 16, 3),
                                  shards=(16, 16, 3), dtype="<f4",
                                  compressors=[ZstdCodec()])
        else:
            root = zarr.open_group(path, mode="w", zarr_format=2)
            p = root.create_array("points", shape=points.shape, chunks=(8, 16, 3),
                                  dtype="<f4", compressors=numcodecs.Blosc(cname="lz4"))
        p[...] = points
        lab = root.create_array("labels", shape=labels.shape, chunks=(20,), dtype="<i8")
        lab[...] = labels
        expected[f"{store}:points"] = describe(p)
        expected[f"{store}:labels"] = describe(lab)


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    expected = {}
    write_v3(expected)
    write_v2(expected)
    write_scenes(expected)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump({"zarr": zarr.__version__, "numcodecs": numcodecs.__version__,
                   "arrays": expected}, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
