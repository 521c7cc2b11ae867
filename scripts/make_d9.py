#!/usr/bin/env python3
"""WORKLOADS.md's D9: `DIR/tokens/docs.jsonl` (JSON lines `{"text": ...}`) and
`DIR/tokens/tokenizer.json` (a GPT-2-style byte-level BPE trained on the first 20,000
documents), drawn as WORKLOADS.md says:

- a 50,000-word vocabulary of random lowercase words of 3..10 letters;
- document lengths in words `round(exp(uniform(ln 50, ln 2000)))`;
- words drawn with p(rank r) proportional to 1 / (r + 10);
- everything from `numpy.random.default_rng(9009)`.

WORKLOADS.md also gives the tokenizer's sha256 from the run that defined D9; numpy's draws
are the same on every machine, but this script is a re-creation from the text, so its files
may differ from that run's (compare the printed sha256 and the token sum of W14).

    python scripts/make_d9.py DIR [--docs N]   # needs numpy and tokenizers (0.23.3)
"""

import argparse
import hashlib
import json
import math
import os

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

p = argparse.ArgumentParser()
p.add_argument("dir")
p.add_argument("--docs", type=int, default=200_000)
args = p.parse_args()
out = os.path.join(args.dir, "tokens")
os.makedirs(out, exist_ok=True)

rng = np.random.default_rng(9009)
letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
lengths = rng.integers(3, 11, 50_000)
vocab = np.array(["".join(rng.choice(letters, n)) for n in lengths])
weights = 1.0 / (np.arange(50_000) + 10.0)
weights /= weights.sum()
cdf = np.cumsum(weights)

docs_path = os.path.join(out, "docs.jsonl")
first = []
words_total = 0
with open(docs_path, "w", encoding="utf-8") as f:
    for d in range(args.docs):
        n = int(round(math.exp(rng.uniform(math.log(50), math.log(2000)))))
        ranks = np.searchsorted(cdf, rng.random(n), side="right").clip(0, 49_999)
        text = " ".join(vocab[ranks])
        words_total += n
        f.write(json.dumps({"text": text}) + "\n")
        if d < 20_000:
            first.append(text)

bpe = Tokenizer(models.BPE())
bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
bpe.decoder = decoders.ByteLevel()
bpe.post_processor = processors.ByteLevel()
bpe.train_from_iterator(
    first,
    trainers.BpeTrainer(
        vocab_size=32_000,
        min_frequency=2,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    ),
)
tok_path = os.path.join(out, "tokenizer.json")
bpe.save(tok_path)
sha = hashlib.sha256(open(tok_path, "rb").read()).hexdigest()
size = os.path.getsize(docs_path)
print(f"D9: {args.docs} documents, {words_total} words, {size / 1e6:.0f} MB; tokenizer "
      f"{bpe.get_vocab_size()} entries, <|endoftext|> = {bpe.token_to_id('<|endoftext|>')}, sha256 {sha}")

# W14m's sources: the same documents in 40 parts of consecutive lines (`parts/part-00.jsonl`
# to `part-39.jsonl`), read by one source in turn or mixed as 40.
parts = os.path.join(out, "parts")
os.makedirs(parts, exist_ok=True)
per = -(-args.docs // 40)
with open(docs_path, encoding="utf-8") as f:
    lines = iter(f)
    for k in range(40):
        with open(os.path.join(parts, f"part-{k:02}.jsonl"), "w", encoding="utf-8") as part:
            for _, line in zip(range(per), lines):
                part.write(line)
print(f"W14m: 40 parts of {per} documents in {parts}")
