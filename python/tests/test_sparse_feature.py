"""parse_example's SparseFeature (tf.io.SparseFeature): a sparse tensor whose indices and
values come from two (or more) features of each example."""

import numpy as np
import pytest

import streamload as sl


def varint(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number, payload):
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def example(**features):
    """A serialized tf.train.Example: ints as Int64List, floats as FloatList, bytes as BytesList."""
    entries = b""
    for name, values in features.items():
        if all(isinstance(v, int) for v in values):
            feature = field(3, field(1, b"".join(varint(v & (2**64 - 1)) for v in values)))
        elif all(isinstance(v, float) for v in values):
            feature = field(2, field(1, np.asarray(values, "<f4").tobytes()))
        else:
            feature = field(1, b"".join(field(1, v) for v in values))
        entries += field(1, field(1, name.encode()) + field(2, feature))
    return field(1, entries)


RECORDS = [
    example(ix=[3, 0], val=[0.5, 1.5], label=[7]),
    example(label=[8]),  # no index, no value: an empty sparse tensor
    example(ix=[9, 2, 4], val=[2.5, 3.5, 4.5], label=[9]),
]
SPEC = {
    "sparse": sl.SparseFeature("ix", "val", sl.float32, 10),
    "label": sl.FixedLenFeature([], sl.int64),
}


def records():
    return sl.Dataset.from_tensor_slices(np.array(RECORDS, dtype=object))


def test_single_examples_sorted_by_index():
    got = list(records().parse_example(SPEC))
    assert [int(e["label"]) for e in got] == [7, 8, 9]
    first = got[0]["sparse"]
    assert first.indices.tolist() == [[0], [3]] and first.values.tolist() == [1.5, 0.5]
    assert first.dense_shape.tolist() == [10] and first.values.dtype == np.float32
    assert got[1]["sparse"].indices.shape == (0, 1)
    assert got[2]["sparse"].to_dense().tolist() == [0, 0, 3.5, 0, 4.5, 0, 0, 0, 0, 2.5]
    assert "ix" not in got[0] and "val" not in got[0]  # only the spec's names


def test_a_batch_has_the_example_index_first():
    (batch,) = list(records().batch(3).parse_example(SPEC))
    s = batch["sparse"]
    assert s.indices.tolist() == [[0, 0], [0, 3], [2, 2], [2, 4], [2, 9]]
    assert s.values.tolist() == [1.5, 0.5, 3.5, 4.5, 2.5]
    assert s.dense_shape.tolist() == [3, 10]
    # The same as batching the single examples' sparse tensors.
    (again,) = list(records().parse_example(SPEC).batch(3))
    np.testing.assert_array_equal(again["sparse"].indices, s.indices)
    np.testing.assert_array_equal(again["sparse"].values, s.values)


def test_already_sorted_keeps_the_order_and_keys_can_be_shared():
    spec = {
        "sparse": sl.SparseFeature("ix", "val", sl.float32, 10, already_sorted=True),
        "ix": sl.VarLenFeature(sl.int64),
    }
    first = next(iter(records().parse_example(spec)))
    assert first["sparse"].indices.tolist() == [[3], [0]]
    assert first["ix"].values.tolist() == [3, 0]


def test_two_dimensional_indices():
    recs = [example(r=[0, 1], c=[2, 0], v=[b"a", b"b"])]
    spec = {"m": sl.SparseFeature(["r", "c"], "v", sl.string, [2, 3])}
    (got,) = list(sl.Dataset.from_tensor_slices(np.array(recs, dtype=object)).parse_example(spec))
    assert got["m"].indices.tolist() == [[0, 2], [1, 0]]
    assert got["m"].values.tolist() == [b"a", b"b"]
    assert got["m"].dense_shape.tolist() == [2, 3]


def test_bad_examples_and_specs_are_errors():
    out_of_range = sl.Dataset.from_tensors(example(ix=[10], val=[1.0]))
    with pytest.raises(sl.InvalidArgumentError, match="out of bounds"):
        list(out_of_range.parse_example({"s": sl.SparseFeature("ix", "val", sl.float32, 10)}))
    lengths = sl.Dataset.from_tensors(example(ix=[1, 2], val=[1.0]))
    with pytest.raises(sl.InvalidArgumentError, match="differ in length"):
        list(lengths.parse_example({"s": sl.SparseFeature("ix", "val", sl.float32, 10)}))
    with pytest.raises(sl.InvalidArgumentError, match="same number"):
        sl.SparseFeature(["a", "b"], "v", sl.float32, 10)
    with pytest.raises(sl.InvalidArgumentError, match="also has it"):
        records().parse_example(
            {"s": SPEC["sparse"], "ix": sl.FixedLenFeature([], sl.int64)}
        )
