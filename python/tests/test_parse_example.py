"""parse_example over examples.tfrecord (20 tf.train.Examples TensorFlow wrote) against
TensorFlow's own parse outputs and errors (tests/data/tensorflow/examples.expected.json)."""

import base64

import numpy as np
import pytest

import streamload as sl
from conftest import TF_DATA, decode_tf, same, tf_json, to_plain

EXPECTED = tf_json("examples.expected.json")
DTYPES = {"int64": sl.int64, "float32": sl.float32, "string": sl.string}
NUMPY = {"int64": np.int64, "float32": np.float32, "string": object}


def fixed_len_spec(spec):
    """The FixedLenFeatures of a spec as examples.expected.json writes it."""
    out = {}
    for name, f in spec.items():
        if f["class"] != "FixedLenFeature":
            continue
        out[name] = sl.FixedLenFeature(f["shape"], DTYPES[f["dtype"]], f["default_value"])
    return out


SPEC = fixed_len_spec(EXPECTED["spec"])


def expected_tensor(t):
    assert t["type"] == "Tensor"
    return decode_tf(t["values"])


def test_spec_covers_the_fixed_len_features():
    assert set(SPEC) == {"id", "embedding", "label", "score", "name", "pair", "matrix"}


def test_tf_data_pipeline_ported_line_by_line():
    # TensorFlow:
    #   ds = tf.data.TFRecordDataset([path])
    #   ds = ds.batch(20)
    #   ds = ds.map(lambda x: tf.io.parse_example(x, spec))
    ds = sl.TFRecordDataset([str(TF_DATA / "examples.tfrecord")])
    ds = ds.batch(20)
    ds = ds.parse_example(SPEC)
    (batch,) = list(ds)
    want = EXPECTED["parse_example_batch"]["output"]
    for name in SPEC:
        array = batch[name]
        assert array.shape == tuple(want[name]["shape"]), name
        assert array.dtype == NUMPY[want[name]["dtype"]], name
        assert same(to_plain(array), expected_tensor(want[name])), name


def test_single_records_parse_as_parse_single_example():
    ds = sl.TFRecordDataset(str(TF_DATA / "examples.tfrecord")).parse_example(SPEC)
    records = EXPECTED["records"]
    parsed = list(ds)
    assert len(parsed) == len(records) == 20
    for record, got in zip(records, parsed):
        want = record["parse_single_example"]
        for name in SPEC:
            value = got[name]
            assert np.shape(value) == tuple(want[name]["shape"]), (record["index"], name)
            assert same(to_plain(value), expected_tensor(want[name])), (record["index"], name)


def test_batched_parse_after_shuffle_keeps_records_together():
    ds = (
        sl.TFRecordDataset(str(TF_DATA / "examples.tfrecord"))
        .shuffle(20, seed=5)
        .batch(6)
        .parse_example({"id": SPEC["id"], "matrix": SPEC["matrix"]})
    )
    batches = list(ds)
    ids = np.concatenate([b["id"] for b in batches])
    assert sorted(ids.tolist()) == list(range(20))
    want = np.array(expected_tensor(EXPECTED["parse_example_batch"]["output"]["matrix"]))
    for b in batches:
        assert np.array_equal(b["matrix"], want[b["id"]])


@pytest.mark.parametrize(
    "case", [c for c in EXPECTED["edge_cases"] if list(c["spec"].values())[0]["class"] == "FixedLenFeature"],
    ids=lambda c: c["name"],
)
def test_edge_cases_give_tensorflows_outputs_and_errors(case):
    record = base64.b64decode(case["serialized_b64"])
    spec = fixed_len_spec(case["spec"])
    ds = sl.Dataset.from_tensors(record).parse_example(spec)
    if case["ok"]:
        (got,) = list(ds)
        for name, want in case["output"].items():
            assert same(to_plain(got[name]), expected_tensor(want))
    else:
        with pytest.raises(sl.InvalidArgumentError) as raised:
            list(ds)
        assert case["error"]["core_message"] in str(raised.value)


def test_only_int64_float32_and_string_features():
    with pytest.raises(sl.InvalidArgumentError, match="dtype must be int64, float32 or string"):
        sl.FixedLenFeature([], "int32")
    with pytest.raises(sl.InvalidArgumentError, match="parse_example: the input must be"):
        list(sl.Dataset.range(2).parse_example({"x": sl.FixedLenFeature([], sl.int64)}))


# ---- Every feature kind: formats_more.json's `parse` cases (single records and batches) ----

PARSE_CASES = tf_json("formats_more.json")["parse"]


def feature(f):
    if f["class"] == "FixedLenFeature":
        return sl.FixedLenFeature(f["shape"], DTYPES[f["dtype"]], f["default_value"])
    if f["class"] == "VarLenFeature":
        return sl.VarLenFeature(DTYPES[f["dtype"]])
    return sl.FixedLenSequenceFeature(
        f["shape"], DTYPES[f["dtype"]], f["allow_missing"], f["default_value"]
    )


def plain(value):
    if isinstance(value, sl.SparseTensorValue):
        return {
            "indices": to_plain(value.indices),
            "values": to_plain(value.values),
            "dense_shape": to_plain(value.dense_shape),
        }
    return to_plain(value)


def expected(t):
    if t["type"] == "SparseTensor":
        return {
            "indices": t["indices"],
            "values": decode_tf(t["values"]),
            "dense_shape": t["dense_shape"],
        }
    return decode_tf(t["values"])


@pytest.mark.parametrize("case", PARSE_CASES, ids=lambda c: c["name"])
def test_every_feature_kind_gives_tensorflows_outputs_and_errors(case):
    if case["mode"] == "single":
        records = base64.b64decode(case["serialized_b64"])
    else:
        records = np.array([base64.b64decode(r) for r in case["serialized_b64"]], dtype=object)
    if not case["ok"]:
        error = case["error"]
        if error["class"] == "TypeError":  # a default of the wrong type, when the spec is made
            with pytest.raises(TypeError):
                feature(case["spec"]["a"])
            return
        # TensorFlow's ValueError of a bad spec: InvalidArgumentError, a ValueError too.
        cls = ValueError if error["class"] == "ValueError" else getattr(sl.errors, error["class"])
        with pytest.raises(cls) as raised:
            spec = {name: feature(f) for name, f in case["spec"].items()}
            list(sl.Dataset.from_tensors(records).parse_example(spec))
        # TensorFlow's message; the record it quotes is escaped here (as Python's repr).
        assert error["core_message"].split(", value: ")[0] in str(raised.value)
        return
    spec = {name: feature(f) for name, f in case["spec"].items()}
    (got,) = list(sl.Dataset.from_tensors(records).parse_example(spec))
    for name, want in case["output"].items():
        if want["type"] == "Tensor":
            assert list(np.shape(got[name])) == want["shape"], name
        else:
            assert isinstance(got[name], sl.SparseTensorValue), name
            assert got[name].indices.dtype == np.int64
        assert same(plain(got[name]), expected(want)), (name, plain(got[name]), expected(want))


def test_sparse_values_batch_and_densify_as_tensorflow():
    # Parsed one by one, then batched: tf.data's batch of sparse tensors.
    records = [
        base64.b64decode(r)
        for r in next(c for c in PARSE_CASES if c["name"] == "batch_varlen_strings")["serialized_b64"]
    ]
    ds = sl.Dataset.from_tensor_slices(np.array(records, dtype=object))
    (batch,) = list(ds.parse_example({"v": sl.VarLenFeature(sl.string)}).batch(3))
    (direct,) = list(ds.batch(3).parse_example({"v": sl.VarLenFeature(sl.string)}))
    assert plain(batch["v"]) == plain(direct["v"])
    assert batch["v"].to_dense(b"").tolist() == [[b"a", b"b"], [b"", b""], [b"\xff", b""]]
    # A map function's SparseTensorValue stays sparse.
    same_again = list(ds.parse_example({"v": sl.VarLenFeature(sl.string)}).map(lambda d: d))
    assert isinstance(same_again[0]["v"], sl.SparseTensorValue)
