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
