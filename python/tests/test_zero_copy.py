"""Batches reach Python without a copy: each numpy array's data is the buffer Rust filled,
owned by the array (through a Rust object as its base) and freed with it."""

import gc

import numpy as np

import streamload as sl
from conftest import TF_DATA


def data_address(array):
    return array.__array_interface__["data"][0]


def test_a_batch_is_the_rust_buffer():
    it = iter(sl.Dataset.range(1000).batch(256))
    batch = next(it)
    (rust,) = it._last_buffer_addresses()
    assert data_address(batch) == rust
    assert not batch.flags.owndata  # the memory belongs to the Rust owner, batch.base
    assert type(batch.base).__name__ == "PySliceContainer"
    assert batch.flags.c_contiguous and batch.flags.writeable
    assert batch.tolist() == list(range(256))


def test_every_array_of_a_structure_is_handed_over():
    ds = sl.Dataset.from_tensor_slices(
        {"image": np.zeros((8, 4, 4, 3), np.uint8), "label": np.arange(8, dtype=np.int32)}
    ).batch(4)
    it = iter(ds)
    batch = next(it)
    # Dict keys in order, as the Rust side lists them.
    assert it._last_buffer_addresses() == [data_address(batch["image"]), data_address(batch["label"])]
    assert batch["image"].shape == (4, 4, 4, 3) and batch["label"].dtype == np.int32


def test_parsed_features_are_handed_over():
    ds = (
        sl.TFRecordDataset(str(TF_DATA / "examples.tfrecord"))
        .batch(20)
        .parse_example(
            {
                "embedding": sl.FixedLenFeature([3], sl.float32),
                "id": sl.FixedLenFeature([], sl.int64),
            }
        )
    )
    it = iter(ds)
    batch = next(it)
    assert it._last_buffer_addresses() == [
        data_address(batch["embedding"]),
        data_address(batch["id"]),
    ]


def test_arrays_outlive_the_iterator_and_are_freed_with_numpy():
    it = iter(sl.Dataset.range(10).batch(5).prefetch(2))
    batches = list(it)
    del it
    gc.collect()
    assert [b.tolist() for b in batches] == [list(range(5)), list(range(5, 10))]
    view = batches[0][1:3]  # a view keeps the Rust buffer alive too
    del batches
    gc.collect()
    assert view.tolist() == [1, 2]


def test_dlpack_shares_the_rust_buffer():
    # numpy arrays speak DLPack: a consumer (torch.from_dlpack, jax.dlpack, numpy) sees the
    # same memory, without a copy.
    it = iter(sl.Dataset.range(64).batch(64))
    batch = next(it)
    shared = np.from_dlpack(batch)
    assert data_address(shared) == it._last_buffer_addresses()[0]
    batch[0] = 41
    assert shared[0] == 41
