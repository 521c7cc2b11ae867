"""RaggedFeature over ragged_examples.tfrecord (tf.train.Examples TensorFlow wrote) against
TensorFlow's own parse outputs and errors (tests/data/tensorflow/ragged_examples.expected.json,
written by scripts/make_ragged_examples.py)."""

import base64

import numpy as np
import pytest

import streamload as sl
from conftest import TF_DATA, decode_tf, same, tf_json, to_plain

EXPECTED = tf_json("ragged_examples.expected.json")
RECORDS = str(TF_DATA / "ragged_examples.tfrecord")
DTYPES = {"int64": sl.int64, "float32": sl.float32, "string": sl.string}
NUMPY = {"int64": np.int64, "float32": np.float32, "string": object, "int32": np.int32}


def feature(f):
    if f["class"] == "RaggedFeature":
        return sl.RaggedFeature(
            DTYPES[f["dtype"]],
            value_key=f["value_key"],
            row_splits_dtype=f.get("row_splits_dtype", "int32"),
        )
    if f["class"] == "VarLenFeature":
        return sl.VarLenFeature(DTYPES[f["dtype"]])
    return sl.FixedLenFeature(f["shape"], DTYPES[f["dtype"]], f["default_value"])


def spec_of(spec_json):
    return {name: feature(f) for name, f in spec_json.items()}


SPEC = spec_of(EXPECTED["spec"])


def check(name, got, want):
    """`got` (what streamload gave) is TensorFlow's output `want`: types, dtypes, values."""
    if want["type"] == "RaggedTensor":
        assert isinstance(got, sl.RaggedTensorValue), name
        assert got.values.dtype == NUMPY[want["dtype"]], name
        assert got.row_splits.dtype == NUMPY[want["row_splits_dtype"]], name
        assert got.row_splits.tolist() == want["row_splits"], name
        assert same(to_plain(got.values), decode_tf(want["values"])), name
    elif want["type"] == "SparseTensor":
        assert isinstance(got, sl.SparseTensorValue), name
        assert got.indices.tolist() == want["indices"], name
        assert same(to_plain(got.values), decode_tf(want["values"])), name
    elif want["shape"] == []:  # a scalar: a numpy scalar, as tf.data's as_numpy_iterator
        assert np.shape(got) == (), name
        assert same([to_plain(got)], decode_tf(want["values"])), name
    else:
        assert isinstance(got, np.ndarray), name
        assert list(got.shape) == want["shape"], name
        assert got.dtype == NUMPY[want["dtype"]], name
        assert same(to_plain(got), decode_tf(want["values"])), name


def test_the_spec_reads_every_type_and_a_value_key():
    assert {f["dtype"] for f in EXPECTED["spec"].values()} == {"int64", "float32", "string"}
    assert SPEC["ids"].value_key == "other_ids"
    assert SPEC["ints"].partitions == ()
    assert SPEC["ints"].row_splits_dtype == "int32"


def test_tf_data_pipeline_ported_line_by_line():
    # TensorFlow:
    #   ds = tf.data.TFRecordDataset([path]).batch(8)
    #   ds = ds.map(lambda x: tf.io.parse_example(x, spec))
    ds = sl.TFRecordDataset([RECORDS]).batch(8).parse_example(SPEC)
    (batch,) = list(ds)
    want = EXPECTED["parse_example_batch"]
    assert set(batch) == set(want)
    for name in want:
        check(name, batch[name], want[name])


def test_single_records_parse_as_parse_single_example():
    got = list(sl.TFRecordDataset(RECORDS).parse_example(SPEC, num_parallel_calls=sl.AUTOTUNE))
    assert len(got) == len(EXPECTED["records"]) == 8
    for record, parsed in zip(EXPECTED["records"], got):
        for name, want in record["parse_single_example"].items():
            check((record["index"], name), parsed[name], want)


def test_batches_of_any_size_and_unbatch_give_each_records_values():
    singles = [r["parse_single_example"] for r in EXPECTED["records"]]
    for size in (1, 3, 5):
        ds = sl.TFRecordDataset(RECORDS).batch(size).parse_example(SPEC)
        rows = list(ds.unbatch())
        assert len(rows) == 8, size
        for want, row in zip(singles, rows):
            for name in SPEC:
                check((size, name), row[name], want[name])


def test_to_list_and_packed_strings():
    (batch,) = list(sl.TFRecordDataset(RECORDS).batch(8).parse_example(SPEC))
    tokens = batch["tokens"]
    assert tokens.nrows() == 8
    assert tokens.to_list()[0] == [b"a", b"bc"]
    assert tokens.row_lengths().tolist() == [2, 0, 0, 3, 0, 0, 0, 5]
    (packed,) = list(
        sl.TFRecordDataset(RECORDS).batch(8).parse_example(SPEC, strings="packed")
    )
    assert isinstance(packed["tokens"].values, sl.PackedStrings)
    assert packed["tokens"].to_list() == tokens.to_list()
    assert packed["tokens"].row_splits.tolist() == tokens.row_splits.tolist()


@pytest.mark.parametrize("case", EXPECTED["cases"], ids=lambda c: c["name"])
def test_edge_cases_give_tensorflows_outputs_and_errors(case):
    records = [base64.b64decode(r) for r in case["serialized_b64"]]
    if case["batched"]:
        data = sl.Dataset.from_tensors(np.array(records, dtype=object).reshape(len(records)))
    else:
        data = sl.Dataset.from_tensors(records[0])
    if case["name"] == "value_key_shared_by_two_ragged":
        # TensorFlow reads the key for both features; streamload refuses the spec.
        with pytest.raises(sl.InvalidArgumentError, match="value_key ints is read by feature a"):
            data.parse_example(spec_of(case["spec"]))
        return
    if case["name"] == "value_key_shared_with_varlen":
        # TensorFlow refuses it too ("Ragged and sparse keys must not intersect").
        assert not case["ok"]
        with pytest.raises(sl.InvalidArgumentError, match="value_key ints"):
            data.parse_example(spec_of(case["spec"]))
        return
    if not case["ok"]:
        with pytest.raises(sl.InvalidArgumentError) as raised:
            list(data.parse_example(spec_of(case["spec"])))
        assert case["error"]["core_message"] in str(raised.value)
        return
    (got,) = list(data.parse_example(spec_of(case["spec"])))
    assert set(got) == set(case["output"])
    for name, want in case["output"].items():
        check((case["name"], name), got[name], want)


def test_partitions_and_other_row_splits_types_are_refused():
    with pytest.raises(sl.InvalidArgumentError, match="partitions are not supported"):
        sl.RaggedFeature(sl.int64, partitions=[("row_lengths", "lengths")])
    with pytest.raises(sl.InvalidArgumentError, match="row_splits_dtype must be int32 or int64"):
        sl.RaggedFeature(sl.int64, row_splits_dtype="float32")
    with pytest.raises(sl.InvalidArgumentError, match="dtype must be int64, float32 or string"):
        sl.RaggedFeature("int32")
    assert sl.RaggedFeature(np.int64, row_splits_dtype=np.int64).row_splits_dtype == "int64"
    assert "RaggedFeature(dtype=int64" in repr(sl.RaggedFeature(sl.int64))


def test_ragged_values_round_trip_through_map_and_refuse_batching():
    ds = sl.TFRecordDataset(RECORDS).batch(4).parse_example({"ints": SPEC["ints"]})
    direct = list(ds)
    mapped = list(ds.map(lambda d: d))
    for a, b in zip(direct, mapped):
        assert isinstance(b["ints"], sl.RaggedTensorValue)
        assert a["ints"].to_list() == b["ints"].to_list()
        assert b["ints"].row_splits.dtype == np.int32
    with pytest.raises(sl.InvalidArgumentError, match="cannot batch again"):
        list(ds.batch(2))
    bad = sl.RaggedTensorValue(np.array([1, 2], dtype=np.int64), np.array([0, 3], dtype=np.int64))
    with pytest.raises(TypeError, match="row_splits"):
        list(sl.Dataset.range(1).map(lambda _: bad))
