"""parse_example's `strings="packed"` (string tensors as one buffer plus offsets, handed over
without a copy) and `num_parallel_calls`: the same values as tf.data's default form."""

import numpy as np
import pytest

import streamload as sl
from conftest import TF_DATA

RECORDS = str(TF_DATA / "examples.tfrecord")
SPEC = {
    "id": sl.FixedLenFeature([], sl.int64),
    "name": sl.FixedLenFeature([], sl.string, default_value="<none>"),
    "tokens": sl.VarLenFeature(sl.string),
}


def data_address(array):
    return array.__array_interface__["data"][0]


def batches(strings, num_parallel_calls=None, batch=6):
    ds = sl.TFRecordDataset(RECORDS).batch(batch)
    return list(ds.parse_example(SPEC, num_parallel_calls=num_parallel_calls, strings=strings))


def test_packed_strings_hold_the_same_bytes_as_the_default():
    default, packed = batches("bytes"), batches("packed")
    assert len(default) == len(packed) == 4  # 20 records, batches of 6
    for d, p in zip(default, packed):
        assert isinstance(d["name"], np.ndarray) and d["name"].dtype == object
        assert isinstance(p["name"], sl.PackedStrings)
        assert p["name"].shape == d["name"].shape
        assert p["name"].values.dtype == np.uint8 and p["name"].offsets.dtype == np.int64
        assert p["name"].to_numpy().tolist() == d["name"].tolist()
        assert np.asarray(p["name"]).tolist() == d["name"].tolist()
        assert [p["name"][i] for i in range(len(p["name"]))] == d["name"].tolist()
        assert p["name"].lengths().tolist() == [len(s) for s in d["name"]]
        np.testing.assert_array_equal(p["id"], d["id"])
        # A sparse tensor's string values are packed too; its indices are untouched.
        assert isinstance(p["tokens"].values, sl.PackedStrings)
        assert p["tokens"].values.tolist() == d["tokens"].values.tolist()
        np.testing.assert_array_equal(p["tokens"].indices, d["tokens"].indices)
        np.testing.assert_array_equal(p["tokens"].dense_shape, d["tokens"].dense_shape)


def test_packed_buffers_are_handed_over_without_a_copy():
    it = iter(
        sl.TFRecordDataset(RECORDS)
        .batch(20)
        .parse_example({"name": SPEC["name"]}, strings="packed")
    )
    batch = next(it)
    ps = batch["name"]
    assert it._last_buffer_addresses() == [data_address(ps.values), data_address(ps.offsets)]
    assert not ps.values.flags.owndata and not ps.offsets.flags.owndata
    assert len(ps.offsets) == 21 and ps.offsets[0] == 0 and ps.offsets[-1] == len(ps.values)


def test_parallel_parse_keeps_the_order():
    want = batches("bytes")
    for strings in ("bytes", "packed"):
        got = batches(strings, num_parallel_calls=sl.AUTOTUNE)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g["id"], w["id"])
            assert np.asarray(g["name"]).tolist() == w["name"].tolist()
    got = batches("bytes", num_parallel_calls=3)
    assert [b["id"].tolist() for b in got] == [b["id"].tolist() for b in want]


def test_single_strings_stay_bytes():
    default = list(sl.TFRecordDataset(RECORDS).parse_example(SPEC))
    packed = list(sl.TFRecordDataset(RECORDS).parse_example(SPEC, strings="packed"))
    for d, p in zip(default, packed, strict=True):
        assert isinstance(p["name"], bytes) and p["name"] == d["name"]
        assert p["tokens"].values.tolist() == d["tokens"].values.tolist()


def test_packed_elements_go_through_later_stages():
    def packed():
        return sl.TFRecordDataset(RECORDS).parse_example(
            {"name": SPEC["name"], "absent": sl.FixedLenFeature([2], sl.string, [b"a", b"bc"])},
            strings="packed",
        )

    want = list(sl.TFRecordDataset(RECORDS).parse_example(
        {"name": SPEC["name"], "absent": sl.FixedLenFeature([2], sl.string, [b"a", b"bc"])}
    ).batch(8))
    # batch stacks them (and packs the batch again).
    got = list(packed().batch(8))
    assert len(got) == len(want) == 3
    for g, w in zip(got, want):
        assert isinstance(g["absent"], sl.PackedStrings) and g["absent"].shape == w["absent"].shape
        assert g["absent"].tolist() == w["absent"].tolist()
        assert g["absent"][1].tolist() == w["absent"][1].tolist()  # a row of a 2-d tensor
        assert g["name"].tolist() == w["name"].tolist()
    # unbatch takes rows back; a Python function receives PackedStrings and may return one.
    rows = list(packed().batch(8).unbatch())
    assert [r["name"] for r in rows] == [n for w in want for n in w["name"].tolist()]
    assert isinstance(rows[0]["absent"], sl.PackedStrings)
    echoed = list(packed().batch(8).map(lambda x: x["absent"]))
    assert [e.tolist() for e in echoed] == [w["absent"].tolist() for w in want]
    assert all(e.dtype == object for e in echoed)


def test_from_list_and_equality():
    ps = sl.PackedStrings.from_list([[b"ab", b""], ["c", b"def"]])
    assert ps.shape == (2, 2) and ps.size == 4 and ps.values.tobytes() == b"abcdef"
    assert ps.offsets.tolist() == [0, 2, 2, 3, 6]
    assert ps[1] == sl.PackedStrings.from_list([b"c", b"def"])
    assert ps[-1][1] == b"def"
    with pytest.raises(IndexError):
        ps[2]
    (back,) = list(sl.Dataset.from_tensors(0).map(lambda _: ps))
    assert back.tolist() == [[b"ab", b""], [b"c", b"def"]]


def test_bad_strings_argument_is_an_error():
    with pytest.raises(sl.InvalidArgumentError, match="packed"):
        sl.TFRecordDataset(RECORDS).parse_example(SPEC, strings="arrow")
    with pytest.raises(sl.InvalidArgumentError, match="num_parallel_calls"):
        sl.TFRecordDataset(RECORDS).parse_example(SPEC, num_parallel_calls=0)


def test_viewed_strings_are_the_records_bytes_without_a_copy():
    default = batches("bytes")
    it = iter(sl.TFRecordDataset(RECORDS).batch(6).parse_example(SPEC, strings="view"))
    for d in default:
        v = next(it)
        names = v["name"]
        assert isinstance(names, sl.StringsView) and names.shape == d["name"].shape
        assert len(names) == len(d["name"]) and names.size == len(d["name"])
        got = [names[i] for i in range(len(names))]
        assert all(g.dtype == np.uint8 and not g.flags.writeable for g in got)
        assert [g.tobytes() for g in got] == d["name"].tolist()
        assert names[-1].tobytes() == d["name"][-1]
        assert names.to_numpy().tolist() == np.asarray(names).tolist() == d["name"].tolist()
        assert names.lengths().tolist() == [len(s) for s in d["name"]]
        # Each array is a view of the bytes Rust held: no copy was made.
        # (The addresses go depth first, keys in order: `id`'s array, then `name`'s strings.)
        address = it._last_buffer_addresses()[1 : 1 + len(got)]
        assert [data_address(g) for g in got if g.size] == [a for a, g in zip(address, got) if g.size]
        assert isinstance(v["tokens"].values, sl.StringsView)
        assert v["tokens"].values.to_numpy().tolist() == d["tokens"].values.tolist()
    with pytest.raises(IndexError):
        names[len(names)]
    with pytest.raises(ValueError):
        got[0][0] = 1  # read-only: the bytes may be a mapped file's


def test_a_view_outlives_its_batch_and_goes_through_later_stages():
    spec = {"name": SPEC["name"], "absent": sl.FixedLenFeature([2], sl.string, [b"a", b"bc"])}
    want = list(sl.TFRecordDataset(RECORDS).parse_example(spec).batch(8))
    viewed = sl.TFRecordDataset(RECORDS).parse_example(spec, strings="view")
    got = list(viewed.batch(8))
    first = got[0]["name"][0]
    del got[0]
    import gc

    gc.collect()
    assert first.tobytes() == want[0]["name"][0]  # the array keeps its bytes alive
    for g, w in zip(got, want[1:]):
        assert isinstance(g["absent"], sl.StringsView) and g["absent"].shape == w["absent"].shape
        assert g["absent"][1][0].tobytes() == w["absent"][1][0]  # a row of a 2-d tensor
    rows = list(viewed.batch(8).unbatch())
    assert [r["name"] for r in rows] == [n for w in want for n in w["name"].tolist()]
    echoed = list(viewed.batch(8).map(lambda x: x["absent"]))
    assert all(isinstance(e, sl.StringsView) for e in echoed)
    assert [e.to_numpy().tolist() for e in echoed] == [w["absent"].tolist() for w in want]
