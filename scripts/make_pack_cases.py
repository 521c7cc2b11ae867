#!/usr/bin/env python3
"""Writes tests/data/pack/cases.json: documents of token ids and the sequences Grain's own
packing transformations make of them (`ConcatThenSplitIterDataset`, `FirstFitPackIterDataset`
and `BestFitPackIterDataset` with `shuffle_bins=False`), which streamload's `Dataset::pack`
must make too (tokens, segment ids, positions; padding is segment 0).

Grain's bin packers refuse a document longer than a sequence (it must be truncated first);
streamload splits one instead, so their cases hold documents no longer than a sequence.

    python3 -m pip install grain==0.2.18 numpy && python3 scripts/make_pack_cases.py
"""

import json
import os

import grain
import grain.experimental as ge
import numpy as np

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "pack", "cases.json")


def docs(rng, n, lo, hi):
    return [rng.integers(1, 50_000, size=int(rng.integers(lo, hi + 1))).tolist() for _ in range(n)]


def run(policy, length, bins, documents):
    parent = grain.MapDataset.source(
        [{"tokens": np.array(d, dtype=np.int32)} for d in documents]
    ).to_iter_dataset()
    lengths = {"tokens": length}
    if policy == "concat_then_split":
        ds = ge.ConcatThenSplitIterDataset(parent, length_struct=lengths)
    elif policy == "first_fit":
        ds = ge.FirstFitPackIterDataset(parent, length_struct=lengths, num_packing_bins=bins, shuffle_bins=False)
    else:
        ds = ge.BestFitPackIterDataset(parent, length_struct=lengths, num_packing_bins=bins, shuffle_bins=False)
    return [
        {
            "tokens": row["tokens"].tolist(),
            "segment_ids": row["tokens_segment_ids"].tolist(),
            "positions": row["tokens_positions"].tolist(),
        }
        for row in ds
    ]


def main():
    rng = np.random.default_rng(32)
    cases = []
    for length, n, hi in [(8, 40, 30), (16, 60, 50), (64, 30, 200), (5, 20, 5)]:
        documents = docs(rng, n, 1, hi)
        cases.append(("concat_then_split", length, None, documents))
    for policy in ["first_fit", "best_fit"]:
        for length, bins, n in [(16, 1, 40), (16, 3, 60), (32, 8, 120), (8, 4, 50)]:
            cases.append((policy, length, bins, docs(rng, n, 1, length)))
    out = {
        "grain": grain.__version__,
        "cases": [
            {"policy": p, "length": l, "bins": b, "docs": d, "rows": run(p, l, b, d)}
            for p, l, b, d in cases
        ],
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f, separators=(",", ":"))
    print(OUT, sum(len(c["rows"]) for c in out["cases"]), "rows")


if __name__ == "__main__":
    main()
