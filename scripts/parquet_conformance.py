#!/usr/bin/env python3
"""Parquet conformance files for streamload's reader (tests/parquet.rs).

Writes, under tests/data/parquet/:
- types-<codec>.parquet for each codec pyarrow's `compression=` takes (none, snappy, gzip,
  brotli, lz4, zstd): 1,000 rows in row groups of 300 (4 row groups), small data pages,
  columns of every kind the reader must handle: int64, int32/float32/bool/string/binary
  with nulls, float64, dictionary-encoded strings (pyarrow's default for strings, plus an
  Arrow dictionary column), list<string> with nulls and empty lists, list<list<int32>>,
  fixed_size_list<float32, 4>, and a struct.
- hf-dataset.parquet: a Hugging Face `datasets.Dataset` written with `to_parquet`.
- types.json and hf-dataset.json: what pyarrow reads back (`to_pylist` per column) and the
  row group sizes, so the Rust tests compare without Python (every types-*.parquet reads
  back the same: checked here). Binary values are written as `{"b64": ...}`.

Run with /work/venv/bin/python scripts/parquet_conformance.py (pyarrow 26, datasets 5.2).
Deterministic: the same files on every run.
"""

import base64
import json
import os
import random

import pyarrow as pa
import pyarrow.parquet as pq

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "parquet")
ROWS = 1000
ROW_GROUP = 300
CODECS = ["none", "snappy", "gzip", "brotli", "lz4", "zstd"]
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


def table():
    rng = random.Random(20)

    def maybe(value, p=0.1):
        return None if rng.random() < p else value

    ids = list(range(ROWS))
    label = [maybe(rng.randrange(-1000, 1000)) for _ in ids]
    # Values exactly representable in float32, so the JSON (a double) compares exactly.
    score = [maybe(rng.randrange(-4096, 4096) / 64.0) for _ in ids]
    # Short decimals: parsed exactly by any JSON reader.
    value = [rng.randrange(-10**8, 10**8) / 8.0 for _ in ids]
    flag = [maybe(rng.random() < 0.5) for _ in ids]
    name = [maybe(rng.choice(WORDS)) for _ in ids]
    category = [rng.choice(WORDS[:3]) for _ in ids]
    blob = [maybe(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 20)))) for _ in ids]
    tags = [
        maybe([maybe(rng.choice(WORDS), 0.05) for _ in range(rng.randrange(0, 4))])
        for _ in ids
    ]
    nested = [
        [[rng.randrange(100) for _ in range(rng.randrange(0, 3))] for _ in range(rng.randrange(0, 3))]
        for _ in ids
    ]
    weights = [[rng.randrange(-512, 512) / 8.0 for _ in range(4)] for _ in ids]
    point = [maybe({"x": rng.randrange(100), "y": rng.choice(WORDS)}) for _ in ids]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "label": pa.array(label, pa.int32()),
            "score": pa.array(score, pa.float32()),
            "value": pa.array(value, pa.float64()),
            "flag": pa.array(flag, pa.bool_()),
            "name": pa.array(name, pa.string()),
            "category": pa.array(category, pa.string()).dictionary_encode(),
            "blob": pa.array(blob, pa.binary()),
            "tags": pa.array(tags, pa.list_(pa.string())),
            "nested": pa.array(nested, pa.list_(pa.list_(pa.int32()))),
            "weights": pa.array(weights, pa.list_(pa.float32(), 4)),
            "point": pa.array(point, pa.struct([("x", pa.int64()), ("y", pa.string())])),
        }
    )


def jsonable(v):
    if isinstance(v, bytes):
        return {"b64": base64.b64encode(v).decode()}
    if isinstance(v, list):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    return v


def expected(path):
    """What pyarrow reads back from `path`, per column."""
    f = pq.ParquetFile(path)
    read = f.read()
    meta = f.metadata
    return {
        "num_rows": read.num_rows,
        "row_groups": [meta.row_group(i).num_rows for i in range(meta.num_row_groups)],
        "columns": {n: jsonable(read.column(n).to_pylist()) for n in read.column_names},
    }


def write_json(path, doc):
    with open(path, "w") as out:
        json.dump(doc, out, sort_keys=True, separators=(",", ":"))
        out.write("\n")


def main():
    os.makedirs(OUT, exist_ok=True)
    t = table()
    docs = []
    for codec in CODECS:
        path = os.path.join(OUT, f"types-{codec}.parquet")
        pq.write_table(
            t,
            path,
            compression=codec,
            row_group_size=ROW_GROUP,
            data_page_size=2048,
        )
        docs.append(expected(path))
    assert all(d == docs[0] for d in docs), "every codec reads back the same"
    write_json(os.path.join(OUT, "types.json"), docs[0])

    # A Hugging Face dataset, as `Dataset.to_parquet` writes it.
    import datasets

    rng = random.Random(5)
    features = datasets.Features(
        {
            "text": datasets.Value("string"),
            "label": datasets.ClassLabel(names=["neg", "pos"]),
            "embedding": datasets.Sequence(datasets.Value("float32"), length=8),
            "tokens": datasets.Sequence(datasets.Value("int64")),
        }
    )
    n = 200
    ds = datasets.Dataset.from_dict(
        {
            "text": [" ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 6))) for _ in range(n)],
            "label": [rng.randrange(2) for _ in range(n)],
            "embedding": [[rng.randrange(-64, 64) / 4.0 for _ in range(8)] for _ in range(n)],
            "tokens": [[rng.randrange(30000) for _ in range(rng.randrange(0, 10))] for _ in range(n)],
        },
        features=features,
    )
    path = os.path.join(OUT, "hf-dataset.parquet")
    ds.to_parquet(path, batch_size=64)
    write_json(os.path.join(OUT, "hf-dataset.json"), expected(path))


if __name__ == "__main__":
    main()
