"""Language-model input from Python: `pack` makes Grain's sequences
(tests/data/pack/cases.json, written by Grain 0.2.18), `batch_by_tokens` keeps whole
documents within a budget, and both resume from a checkpoint in the middle of a document."""

import json

import numpy as np
import pytest

import streamload as sl
from conftest import REPO_DATA

CASES = json.loads((REPO_DATA / "pack" / "cases.json").read_text())["cases"]


def documents(docs, dtype=np.int64):
    return sl.Dataset.range(len(docs)).map(lambda i: np.array(docs[int(i)], dtype))


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['policy']}-{c['length']}-{c['bins']}")
def test_pack_makes_grains_sequences(case):
    rows = list(documents(case["docs"]).pack(case["length"], case["policy"], case["bins"]))
    assert len(rows) == len(case["rows"])
    for got, want in zip(rows, case["rows"]):
        assert sorted(got) == ["loss_mask", "positions", "segment_ids", "tokens"]
        assert got["tokens"].dtype == np.uint32 and got["segment_ids"].dtype == np.int32
        assert got["tokens"].tolist() == want["tokens"]
        assert got["segment_ids"].tolist() == want["segment_ids"]
        assert got["positions"].tolist() == want["positions"]
        assert got["loss_mask"].tolist() == [s != 0 for s in want["segment_ids"]]


def test_pack_takes_the_tokenizers_ids_and_refuses_what_are_not_ids():
    tok = sl.text.Tokenizer(str(REPO_DATA / "tokenizer" / "byte_level.json"), end_token="<|endoftext|>")
    texts = np.array([b"some words of the corpus", b"and a few more"], dtype=object)
    ids = [tok.encode()(t).tolist() for t in texts]
    (row,) = list(sl.Dataset.from_tensor_slices(texts).map(tok.encode()).pack(64))
    n = len(ids[0]) + len(ids[1])
    assert row["tokens"][:n].tolist() == ids[0] + ids[1]
    assert row["segment_ids"][:n].tolist() == [1] * len(ids[0]) + [2] * len(ids[1])
    # The ids picked from a dict by key=.
    keyed = sl.Dataset.from_tensor_slices({"text": texts}).map(tok.encode(key="text"))
    (same,) = list(keyed.pack(64, key="text"))
    assert same["tokens"].tolist() == row["tokens"].tolist()
    with pytest.raises(sl.InvalidArgumentError, match="no key"):
        list(keyed.pack(64, key="ids"))
    with pytest.raises(sl.InvalidArgumentError, match="1-D integer array"):
        list(sl.Dataset.from_tensors(np.zeros((2, 2), np.int32)).pack(4))
    with pytest.raises(sl.InvalidArgumentError, match="0..2"):
        list(documents([[1, -1]]).pack(4))
    with pytest.raises(sl.InvalidArgumentError, match="needs num_packing_bins"):
        documents([[1]]).pack(4, "best_fit")
    with pytest.raises(sl.InvalidArgumentError, match="packing must be"):
        documents([[1]]).pack(4, "next_fit", 2)


def test_batch_by_tokens_keeps_whole_documents_within_the_budget():
    docs = [[1] * 3, [2] * 4, [3] * 2, [4] * 9, [5] * 5, [6]]
    out = []
    it = iter(documents(docs).batch_by_tokens(8))
    while True:
        try:
            out.append(next(it))
        except StopIteration:
            break
        except sl.InvalidArgumentError as e:
            out.append(str(e))
    assert out[0][0].tolist() == [1] * 3 + [2] * 4 and out[0][1].tolist() == [0, 3, 7]
    assert "an element of 9 tokens is longer than the budget of 8" in out[1]
    assert out[2][1].tolist() == [0, 2, 7, 8]


@pytest.mark.parametrize("packing,bins", [("concat_then_split", None), ("best_fit", 3)])
def test_pack_resumes_in_the_middle_of_a_document(packing, bins):
    docs = [list(range(i * 100, i * 100 + (i * 37 + 11) % 29)) for i in range(40)]

    def build():
        return documents(docs).shuffle(7, seed=2).pack(8, packing, bins)

    full = [r["tokens"].tolist() for r in build()]
    for k in [0, 1, 7, len(full) // 2, len(full)]:
        it = iter(build())
        seen = [next(it)["tokens"].tolist() for _ in range(k)]
        state = it.checkpoint()
        del it
        seen += [r["tokens"].tolist() for r in build().iter_from(state)]
        assert seen == full, k


def test_sample_from_datasets_draws_by_weight_and_keeps_each_order():
    a, b = sl.Dataset.range(0, 3000), sl.Dataset.range(10_000, 13_000)
    out = [int(x) for x in sl.Dataset.sample_from_datasets([a, b], [0.25, 0.75], seed=3).take(4000)]
    small = [x for x in out if x < 10_000]
    assert small == sorted(small) and abs(len(small) - 1000) < 5 * (4000 * 0.25 * 0.75) ** 0.5
    again = [int(x) for x in sl.Dataset.sample_from_datasets([a, b], [0.25, 0.75], seed=3).take(4000)]
    assert again == out
    with pytest.raises(sl.InvalidArgumentError, match="same length"):
        sl.Dataset.sample_from_datasets([a, b], [1.0])
    with pytest.raises(sl.InvalidArgumentError, match="rerandomize_each_iteration"):
        sl.Dataset.sample_from_datasets([a, b], rerandomize_each_iteration=True)


def test_mix_follows_its_schedule_and_resumes_under_new_weights():
    def sources():
        return [sl.Dataset.range(0, 10**6), sl.Dataset.range(10**7, 10**7 + 10**6)]

    def second(xs):
        return sum(1 for x in xs if x >= 10**7)

    steps = [int(x) for x in sl.Dataset.mix(sources(), [(0, [1.0, 0.0]), (500, [0.2, 0.8])], seed=1).take(3000)]
    assert second(steps[:500]) == 0
    assert abs(second(steps[500:]) - 2000) < 5 * (2500 * 0.2 * 0.8) ** 0.5
    # A checkpoint resumed by a recipe with other weights goes on from its step.
    it = iter(sl.Dataset.mix(sources(), [0.9, 0.1], seed=2))
    seen = [int(next(it)) for _ in range(100)]
    state = it.checkpoint()
    resumed = sl.Dataset.mix(sources(), [0.1, 0.9], seed=2).iter_from(state)
    rest = [int(next(resumed)) for _ in range(2000)]
    assert abs(second(rest) - 1800) < 5 * (2000 * 0.1 * 0.9) ** 0.5
    assert [x for x in seen + rest if x < 10**7] == sorted(x for x in seen + rest if x < 10**7)
    with pytest.raises(sl.InvalidArgumentError, match="1 weights for 2 datasets"):
        sl.Dataset.mix(sources(), [1.0])
    with pytest.raises(sl.InvalidArgumentError, match="pairs"):
        sl.Dataset.mix(sources(), "half")


def test_mix_over_tokens_counts_each_documents_tokens_and_starts_where_told():
    short = documents([[1, 1]] * 100)
    long = documents([[2] * 10] * 100)
    # Short documents only for the first 20 tokens, then long ones only.
    schedule = [(0, [1.0, 0.0]), (20, [0.0, 1.0])]
    lengths = [len(d) for d in sl.Dataset.mix([short, long], schedule, seed=1, over_tokens=True).take(12)]
    assert lengths == [2] * 10 + [10, 10]
    # The schedule started at token 16: two more short documents, then long ones.
    started = sl.Dataset.mix([short, long], schedule, seed=1, over_tokens=True, start_step=16)
    assert [len(d) for d in started.take(4)] == [2, 2, 10, 10]
    # By key, in dicts.
    keyed = [d.map(lambda x: {"ids": x}) for d in (short, long)]
    rows = list(sl.Dataset.mix(keyed, schedule, seed=1, over_tokens=True, key="ids").take(12))
    assert [len(r["ids"]) for r in rows] == [2] * 10 + [10, 10]
    with pytest.raises(sl.InvalidArgumentError, match="1-D integer array"):
        list(sl.Dataset.mix([sl.Dataset.range(3)], [1.0], over_tokens=True))
    with pytest.raises(sl.InvalidArgumentError, match="needs over_tokens"):
        sl.Dataset.mix([short], [1.0], key="ids")


def test_choose_from_datasets_takes_each_element_from_the_dataset_chosen():
    # tf.data's own example.
    datasets = [sl.Dataset.from_tensors(b"foo").repeat(), sl.Dataset.from_tensors(b"bar").repeat(),
                sl.Dataset.from_tensors(b"baz").repeat()]
    choice = sl.Dataset.range(3).repeat(3)
    out = list(sl.Dataset.choose_from_datasets(datasets, choice))
    assert out == [b"foo", b"bar", b"baz"] * 3
    # An input that runs out ends the result (stop_on_empty_dataset=True, tf.data's default).
    short = [sl.Dataset.range(0, 2), sl.Dataset.range(10, 20)]
    pick = sl.Dataset.from_tensor_slices(np.array([0, 1, 0, 1, 0, 1], np.int64))
    assert [int(x) for x in sl.Dataset.choose_from_datasets(short, pick)] == [0, 10, 1, 11]
    assert [int(x) for x in sl.Dataset.choose_from_datasets(short, pick, stop_on_empty_dataset=False)] == [
        0, 10, 1, 11, 12]
    with pytest.raises(sl.InvalidArgumentError, match="int64 scalars"):
        list(sl.Dataset.choose_from_datasets(short, sl.Dataset.from_tensors(np.array([0, 1]))))


def test_a_ragged_parquet_token_column_packs_as_its_documents(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(5)
    docs = [rng.integers(0, 50_000, rng.integers(0, 40)).tolist() for _ in range(300)]
    path = tmp_path / "tokens.parquet"
    pq.write_table(pa.table({"ids": pa.array(docs, pa.list_(pa.int32())), "n": [len(d) for d in docs]}),
                   path, row_group_size=64)
    with pytest.raises(sl.InvalidArgumentError, match="ragged lists"):
        list(sl.ParquetDataset(str(path)))
    batches = list(sl.ParquetDataset(str(path), batch_size=50, ragged=True))
    assert isinstance(batches[0]["ids"], sl.ragged.RaggedTensorValue)
    rows = list(sl.ParquetDataset(str(path), batch_size=50, ragged=True).unbatch())
    assert [r["ids"].tolist() for r in rows] == docs
    assert [int(r["n"]) for r in rows] == [len(d) for d in docs]
    seqs = list(sl.ParquetDataset(str(path), ragged=True).unbatch().pack(64, key="ids"))
    flat = [t for d in docs for t in d]
    got = [t for s in seqs for t, m in zip(s["tokens"].tolist(), s["loss_mask"].tolist()) if m]
    assert got == flat
    # Resumed in the middle of the column's documents.
    ds = sl.ParquetDataset(str(path), batch_size=50, ragged=True).unbatch().pack(64, key="ids")
    it = iter(ds)
    first = [next(it)["tokens"].tolist() for _ in range(7)]
    state = it.checkpoint()
    del it
    assert first + [s["tokens"].tolist() for s in ds.iter_from(state)] == [s["tokens"].tolist() for s in seqs]
