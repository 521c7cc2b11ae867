#!/usr/bin/env python3
"""W14's Python peers (WORKLOADS.md) on D9, one JSON line per figure, as examples/workloads.rs
prints streamload's:

- `datasets`: Hugging Face `datasets`: `load_dataset("json")`, `map(batched=True,
  num_proc=2)` tokenizing with the `tokenizers` package (`encode_batch`, no special tokens, the
  end id appended; `TOKENIZERS_PARALLELISM=false` in the two processes), then packing with
  numpy: the ids concatenated, cut into sequences of 2,048 and batches of 8 (`int32`, the
  last partial batch dropped). Caching off: every run converts and tokenizes.
- `tokenizers`: the same in one process, `encode_batch` of 1,000 documents at a time on the
  package's own threads, the JSON lines parsed with `json.loads`.

Both print the tokens of the batches and the sum of their ids, the check against
streamload's (`workloads --only W14` prints its sum to stderr).

    python3 -m pip install datasets tokenizers==0.23.3 numpy
    python3 scripts/peers_w14.py DIR [--only datasets|tokenizers]
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

SEQ, BATCH = 2048, 8


def pack(ids):
    """The concatenated ids as int32 batches [n, 8, 2048], the last partial batch dropped."""
    n = len(ids) // (SEQ * BATCH) * SEQ * BATCH
    return ids[:n].astype(np.int32).reshape(-1, BATCH, SEQ)


def emit(system, tokens, total, seconds, extra):
    print(json.dumps({"system": system, "workload": "W14", "figure": tokens / seconds,
                      "unit": "tokens/s", "seconds": seconds, "tokens": int(tokens),
                      "sum": int(total), **extra}), flush=True)


def with_datasets(path, tokenizer_file):
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    import datasets
    from tokenizers import Tokenizer

    datasets.disable_caching()
    tokenizer = Tokenizer.from_file(tokenizer_file)
    end = tokenizer.token_to_id("<|endoftext|>")

    def encode(batch):
        encoded = tokenizer.encode_batch(batch["text"], add_special_tokens=False)
        return {"ids": [e.ids + [end] for e in encoded]}

    cache = tempfile.mkdtemp(prefix="w14-")
    try:
        start = time.perf_counter()
        ds = datasets.load_dataset("json", data_files=path, split="train", cache_dir=cache)
        loaded = time.perf_counter()
        ds = ds.map(encode, batched=True, num_proc=2, remove_columns=["text"],
                    load_from_cache_file=False)
        mapped = time.perf_counter()
        ids = ds.data.column("ids").combine_chunks().flatten().to_numpy()
        batches = pack(ids)
        seconds = time.perf_counter() - start
        total = int(batches.sum(dtype=np.int64))
        emit("datasets", batches.size, total, seconds,
             {"load": loaded - start, "map": mapped - loaded, "pack": seconds - (mapped - start)})
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def with_tokenizers(path, tokenizer_file):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(tokenizer_file)
    end = tokenizer.token_to_id("<|endoftext|>")
    start = time.perf_counter()
    chunks, texts = [], []

    def flush():
        for e in tokenizer.encode_batch(texts, add_special_tokens=False):
            chunks.append(np.array(e.ids + [end], dtype=np.int32))
        texts.clear()

    with open(path, encoding="utf-8") as f:
        for line in f:
            texts.append(json.loads(line)["text"])
            if len(texts) == 1000:
                flush()
    flush()
    batches = pack(np.concatenate(chunks))
    seconds = time.perf_counter() - start
    emit("tokenizers", batches.size, int(batches.sum(dtype=np.int64)), seconds, {})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--only", choices=["datasets", "tokenizers"])
    args = p.parse_args()
    path = os.path.join(args.dir, "tokens", "docs.jsonl")
    tokenizer_file = os.path.join(args.dir, "tokens", "tokenizer.json")
    if args.only in (None, "datasets"):
        with_datasets(path, tokenizer_file)
    if args.only in (None, "tokenizers"):
        with_tokenizers(path, tokenizer_file)


if __name__ == "__main__":
    sys.exit(main())
