#!/usr/bin/env python3
"""Writes tests/data/tokenizer: a GPT-2-style byte-level BPE trained with Hugging Face
`tokenizers` (D9's recipe in WORKLOADS.md, on a small corpus, 600 entries), a WordPiece
tokenizer with a normalizer (BERT's shape), and `cases.json`: texts and the ids the
`tokenizers` package gives them (`encode(text, add_special_tokens=False).ids`), which
streamload's `text::Tokenizer` must give too.

    python3 -m pip install tokenizers==0.23.3 && python3 scripts/make_tokenizer_cases.py
"""

import json
import os
import random

import tokenizers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "tokenizer")

rng = random.Random(32)
letters = "abcdefghijklmnopqrstuvwxyz"
vocab = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 10))) for _ in range(400)]
corpus = [
    " ".join(rng.choices(vocab, weights=[1 / (r + 10) for r in range(len(vocab))], k=rng.randint(5, 60)))
    for _ in range(2000)
]
corpus += ["Ünïcödé façade naïve café — “quotes” and emoji 🚀🦀 in text", "tabs\tand\nnew lines  double  spaces"] * 20

bpe = Tokenizer(models.BPE())
bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
bpe.decoder = decoders.ByteLevel()
bpe.post_processor = processors.ByteLevel()
bpe.train_from_iterator(
    corpus,
    trainers.BpeTrainer(
        vocab_size=600,
        min_frequency=2,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    ),
)

wp = Tokenizer(models.WordPiece(unk_token="[UNK]"))
wp.normalizer = normalizers.BertNormalizer(lowercase=True)
wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
wp.train_from_iterator(
    corpus, trainers.WordPieceTrainer(vocab_size=500, special_tokens=["[UNK]", "[SEP]", "[PAD]"])
)

texts = corpus[:40] + [
    "",
    " ",
    "   leading and trailing spaces   ",
    "UPPER Case Words",
    "numbers 12345 and 3.14159",
    "Ünïcödé façade naïve café",
    "emoji 🚀🦀 and CJK 漢字かな",
    "the end token <|endoftext|> inside a text",
    "tabs\tand\nnew lines\r\n",
    "a" * 300,
    " ".join(vocab[:50]),
    "zzzzqqqq xyxyxy unseenwordsinthecorpus",
]

cases = {
    "tokenizers": tokenizers.__version__,
    "byte_level": [{"text": t, "ids": bpe.encode(t, add_special_tokens=False).ids} for t in texts],
    "wordpiece": [{"text": t, "ids": wp.encode(t, add_special_tokens=False).ids} for t in texts],
}
os.makedirs(OUT, exist_ok=True)
bpe.save(os.path.join(OUT, "byte_level.json"))
wp.save(os.path.join(OUT, "wordpiece.json"))
with open(os.path.join(OUT, "cases.json"), "w", encoding="utf-8") as f:
    json.dump(cases, f, ensure_ascii=False, indent=0)
print(f"{len(texts)} texts, byte-level vocab {bpe.get_vocab_size()}, wordpiece {wp.get_vocab_size()}")
