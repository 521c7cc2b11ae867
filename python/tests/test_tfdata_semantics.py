"""tf.data pipelines ported line by line give TensorFlow's elements: the cases of
tests/data/tensorflow/semantics.json (TensorFlow 2.21's own outputs) whose operations the
Python package has, each written as the tf.data expression in the case's `pipeline`."""

import numpy as np
import pytest

import streamload as sl
from conftest import decode_tf, same, semantics_case, to_plain

Dataset = sl.Dataset

# semantics.json's helpers: seqs(l) has an element [x] * x for each x; K is interleave's
# inner sizes.
K = {1: 4, 2: 1, 3: 3, 4: 0, 5: 5}


def seqs(lengths):
    return Dataset.from_tensor_slices(lengths).map(lambda x: np.full(x, x))


def check_numerics_reciprocal(x):
    """tf.debugging.check_numerics(1 / x): an error for a non-finite result."""
    with np.errstate(divide="ignore"):
        y = np.float32(1) / x
    if not np.isfinite(y):
        raise ValueError("Tensor had Inf values")
    return y


# Case name -> the pipeline, ported from the case's tf.data expression.
PORTED = {
    "range_stop": lambda: Dataset.range(5),
    "range_step": lambda: Dataset.range(2, 12, 3),
    "range_negative_step_to_negative": lambda: Dataset.range(3, -4, -2),
    "range_empty": lambda: Dataset.range(5, 5),
    "batch_remainder": lambda: Dataset.range(10).batch(3),
    "batch_exact_drop_remainder": lambda: Dataset.range(9).batch(3, drop_remainder=True),
    "batch_larger_than_input_drop": lambda: Dataset.range(2).batch(5, drop_remainder=True),
    "batch_of_batch": lambda: Dataset.range(10).batch(4).batch(2),
    "batch_dict": lambda: Dataset.from_tensor_slices(
        {"a": np.arange(5), "b": [f"s{i}" for i in range(5)]}
    ).batch(3),
    "batch_then_repeat": lambda: Dataset.range(5).batch(3).repeat(2),
    "repeat_then_batch": lambda: Dataset.range(5).repeat(2).batch(3),
    "repeat_3_take_7": lambda: Dataset.range(3).repeat(3).take(7),
    "repeat_zero": lambda: Dataset.range(3).repeat(0),
    "repeat_minus_one_take": lambda: Dataset.range(2).repeat(-1).take(5),
    "take_3": lambda: Dataset.range(10).take(3),
    "take_minus_1": lambda: Dataset.range(5).take(-1),
    "take_overshoot": lambda: Dataset.range(5).take(100),
    "skip_3": lambda: Dataset.range(10).skip(3),
    "skip_minus_1": lambda: Dataset.range(5).skip(-1),
    "skip_overshoot": lambda: Dataset.range(5).skip(100),
    "shard_3_0": lambda: Dataset.range(10).shard(num_shards=3, index=0),
    "shard_3_2": lambda: Dataset.range(10).shard(num_shards=3, index=2),
    "shard_2_1": lambda: Dataset.range(10).shard(num_shards=2, index=1),
    "shard_4_3": lambda: Dataset.range(10).shard(num_shards=4, index=3),
    "shard_11_10": lambda: Dataset.range(10).shard(num_shards=11, index=10),
    "shard_after_batch": lambda: Dataset.range(10).batch(2).shard(2, 1),
    "map_square": lambda: Dataset.range(5).map(lambda x: x * x),
    "filter_even": lambda: Dataset.range(10).filter(lambda x: x % 2 == 0),
    "filter_after_batch": lambda: Dataset.range(10).batch(3).filter(lambda b: b.sum() > 5),
    "shuffle_buffer_1_identity": lambda: Dataset.range(10).shuffle(buffer_size=1),
    "from_tensor_slices_2d": lambda: Dataset.from_tensor_slices([[1, 2], [3, 4], [5, 6]]),
    "from_generator": lambda: Dataset.from_generator(lambda: iter([3, 1, 2])),
    "prefetch_identity": lambda: Dataset.range(5).prefetch(2),
    "padded_batch_default": lambda: seqs([1, 3, 2, 5, 4]).padded_batch(2),
    "padded_batch_fixed_shape": lambda: seqs([1, 3, 2, 5, 4]).padded_batch(2, padded_shapes=[6]),
    "padded_batch_tuple": lambda: Dataset.zip((seqs([2, 1, 3]), Dataset.range(3))).padded_batch(
        2, padding_values=(-1, 0)
    ),
    "padded_batch_scalars": lambda: Dataset.range(5).padded_batch(2),
    "unbatch": lambda: Dataset.range(10).batch(3).unbatch(),
    "unbatch_tuple": lambda: Dataset.zip((Dataset.range(4), Dataset.range(10, 14)))
    .batch(3)
    .unbatch(),
    **{
        f"interleave_uneven_c{c}_b{b}": (
            lambda c=c, b=b: Dataset.range(1, 6).interleave(
                lambda x: Dataset.range(10 * x, 10 * x + K[int(x)]),
                cycle_length=c,
                block_length=b,
                deterministic=True,
            )
        )
        for c, b in [(1, 1), (1, 3), (2, 2), (3, 1), (3, 3), (4, 2)]
    },
    "interleave_uneven_c2_b2_parallel": lambda: Dataset.range(1, 6).interleave(
        lambda x: Dataset.range(10 * x, 10 * x + K[int(x)]),
        cycle_length=2,
        block_length=2,
        num_parallel_calls=2,
        deterministic=True,
    ),
    "interleave_uniform_c2_b1": lambda: Dataset.range(1, 4).interleave(
        lambda x: Dataset.range(10 * x, 10 * x + 3), cycle_length=2, block_length=1
    ),
    "interleave_first_long": lambda: Dataset.from_tensor_slices([6, 2, 2, 2])
    .enumerate()
    .interleave(
        lambda i, k: Dataset.range(10 * (i + 1), 10 * (i + 1) + k), cycle_length=2, block_length=1
    ),
    "interleave_all_empty": lambda: Dataset.range(1, 4).interleave(
        lambda x: Dataset.range(0), cycle_length=2
    ),
    "flat_map": lambda: Dataset.range(1, 5).flat_map(lambda x: Dataset.range(x)),
    "flat_map_equals_interleave_c1": lambda: Dataset.range(1, 6).flat_map(
        lambda x: Dataset.range(10 * x, 10 * x + K[int(x)])
    ),
    "zip_unequal": lambda: Dataset.zip((Dataset.range(5), Dataset.range(10, 13))),
    "zip_dict": lambda: Dataset.zip({"a": Dataset.range(3), "b": Dataset.range(5, 8)}),
    "concatenate": lambda: Dataset.range(3).concatenate(Dataset.range(10, 13)),
    "concatenate_chain": lambda: Dataset.range(2)
    .concatenate(Dataset.range(0))
    .concatenate(Dataset.range(7, 9)),
    "enumerate_start_5": lambda: Dataset.range(10, 14).enumerate(start=5),
    "cache_repeat": lambda: Dataset.range(5).cache().repeat(2),
    "take_while_lt5": lambda: Dataset.range(10).take_while(lambda x: x < 5),
    "take_while_never": lambda: Dataset.range(10).take_while(lambda x: x < 0),
    "map_error_then_ignore_errors": lambda: Dataset.from_tensor_slices([1.0, 0.0, 2.0])
    .map(check_numerics_reciprocal)
    .ignore_errors(),
}

# The same pipelines with the Python functions run in parallel, and prefetching on top:
# tf.data's deterministic order, the same elements.
PARALLEL = {
    "map_square": lambda: Dataset.range(5).map(lambda x: x * x, num_parallel_calls=3),
    "map_square_autotune": lambda: Dataset.range(5)
    .map(lambda x: x * x, num_parallel_calls=sl.AUTOTUNE)
    .prefetch(sl.AUTOTUNE),
}


@pytest.mark.parametrize("name", sorted(PORTED))
def test_ported_pipeline_gives_tensorflows_elements(name):
    case = semantics_case(name)
    assert case["compare"] == "exact" and "error" not in case
    got = [to_plain(e) for e in PORTED[name]()]
    assert same(got, decode_tf(case["output"])), (case["pipeline"], got)


@pytest.mark.parametrize("name", sorted(PARALLEL))
def test_parallel_map_keeps_tensorflows_order(name):
    case = semantics_case("map_square")
    got = [to_plain(e) for e in PARALLEL[name]()]
    assert got == case["output"]


def test_elements_have_tensorflows_types():
    # tf.data's range is int64; as_numpy_iterator gives numpy scalars and arrays.
    (first,) = list(Dataset.range(1))
    assert isinstance(first, np.int64)
    assert list(Dataset.range(3).as_numpy_iterator()) == [0, 1, 2]
    (batch,) = list(Dataset.range(3).batch(3))
    assert batch.dtype == np.int64 and batch.shape == (3,)
    (row,) = list(Dataset.from_tensor_slices([[1.5, 2.5]]))
    assert row.dtype == np.float32  # a Python float list is float32, as tf.constant makes it
    element = next(iter(Dataset.from_tensor_slices({"a": np.arange(5), "b": [b"x"] * 5})))
    assert set(element) == {"a", "b"} and element["b"] == b"x"


@pytest.mark.parametrize(
    "name, build",
    [
        ("range_zero_step", lambda: Dataset.range(0, 5, 0)),
        ("shard_index_out_of_range", lambda: Dataset.range(10).shard(3, 3)),
    ],
)
def test_construction_errors_are_tensorflows(name, build):
    case = semantics_case(name)
    error = case["error"]
    assert error["stage"] == "construction" and error["class"] == "InvalidArgumentError"
    with pytest.raises(sl.InvalidArgumentError) as raised:
        build()
    # The key phrase of TensorFlow's message.
    phrase = error["core_message"].split(" (")[0].rstrip(".")
    assert phrase.lower() in str(raised.value).lower()


@pytest.mark.parametrize(
    "name, build",
    [
        ("cardinality_batch", lambda: Dataset.range(10).batch(3)),
        ("cardinality_filter_unknown", lambda: Dataset.range(10).filter(lambda x: x < 3)),
        ("cardinality_repeat_infinite_take", lambda: Dataset.range(10).repeat().take(7)),
        ("cardinality_skip_overshoot", lambda: Dataset.range(10).skip(20)),
        ("cardinality_range_negative_step", lambda: Dataset.range(10, 0, -3)),
    ],
)
def test_cardinality_is_tensorflows(name, build):
    assert build().cardinality() == semantics_case(name)["output"]


def test_shuffle_reshuffles_each_iteration_unless_told_not_to():
    # semantics.json's shuffle cases are TF-RNG traces: only their properties are normative.
    case = semantics_case("shuffle_reshuffle_each_iteration_true")
    assert "epochs_differ" in str(case.get("properties"))
    ds = Dataset.range(10).shuffle(10, seed=42)
    first, second = [int(x) for x in ds], [int(x) for x in ds]
    assert sorted(first) == sorted(second) == list(range(10)) and first != second
    ds = Dataset.range(10).shuffle(10, seed=42, reshuffle_each_iteration=False)
    assert [int(x) for x in ds] == [int(x) for x in ds]


def test_shuffle_buffer_bounds_how_far_an_element_moves():
    # shuffle_buffer_2_locality: the element at output i comes from input [0, i + 1].
    out = [int(x) for x in Dataset.range(20).shuffle(2, seed=5)]
    assert sorted(out) == list(range(20))
    assert all(x <= i + 1 for i, x in enumerate(out))


def test_padding_to_a_smaller_shape_is_tensorflows_data_loss_error():
    case = semantics_case("padded_batch_shape_too_small")
    it = iter(seqs([1, 3, 2, 5, 4]).padded_batch(2, padded_shapes=[3]))
    got = [to_plain(next(it)) for _ in range(case["error"]["elements_before_error"])]
    assert got == case["output"]
    with pytest.raises(sl.DataLossError, match=case["error"]["core_message"].rstrip(".")):
        next(it)


def test_cache_freezes_a_shuffle():
    # cache_after_shuffle_freezes_order: its properties are normative.
    ds = Dataset.range(10).shuffle(10, seed=42).cache().repeat(2)
    out = [int(x) for x in ds]
    assert out[:10] == out[10:] and sorted(out[:10]) == list(range(10))
    with pytest.raises(sl.InvalidArgumentError, match="caching to a file"):
        Dataset.range(3).cache("/tmp/x")


def test_interleave_functions_must_return_datasets():
    with pytest.raises(TypeError, match="must return a Dataset"):
        list(Dataset.range(3).flat_map(lambda x: x))


def test_reduce_is_tensorflows():
    case = semantics_case("reduce_sum")
    assert Dataset.range(5).reduce(0, lambda s, x: s + x) == case["output"]


def test_one_string_is_bytes_wherever_it_goes():
    # A 0-d tf.string (a record, a file name: held by the extension as one string, not an
    # array) is `bytes` however it was made and wherever it went, and an object array of
    # `bytes` once batched, as tf.data's as_numpy_iterator gives.
    words = [b"a", b"bb", b"", b"dddd"]
    ds = Dataset.from_tensor_slices(np.array(words, dtype=object))
    assert list(ds) == words
    assert all(type(w) is bytes for w in ds.shuffle(4, seed=1).prefetch(2))
    batches = list(ds.shuffle(4, seed=1).batch(3))
    assert [(b.dtype, b.shape) for b in batches] == [(object, (3,)), (object, (1,))]
    assert sorted(np.concatenate(batches).tolist()) == sorted(words)
    assert list(ds.batch(3).unbatch()) == words
    assert [b.tolist() for b in ds.batch(2).batch(2)] == [[[b"a", b"bb"], [b"", b"dddd"]]]
    (padded,) = list(ds.padded_batch(4))
    assert (padded.dtype, padded.tolist()) == (object, words)
    made = Dataset.range(3).map(lambda x: [b"x", "y", np.array(b"z", dtype=object)][x])
    assert list(made) == [b"x", b"y", b"z"]
    assert list(made.map(lambda s: s + b"!")) == [b"x!", b"y!", b"z!"]
    # One string and a vector of strings do not batch together (TensorFlow's error).
    mixed = Dataset.range(2).map(lambda x: b"a" if x == 0 else [b"a"]).batch(2)
    message = r"component 0\. First element had shape \[\] and element 1 had shape \[1\]"
    with pytest.raises(sl.Error, match=message):
        list(mixed)
