"""Errors: Python exceptions named as tf.errors', with the Rust message (the file, the
offset, the record); your own function's exception raised as itself."""

import pytest

import streamload as sl
from conftest import TF_DATA, tf_json


def offsets():
    return tf_json("tfrecord_files.json")["files"]["plain.tfrecord"]["record_offsets"]


def test_corrupt_record_is_a_data_loss_error_naming_the_file_and_offset():
    path = str(TF_DATA / "corrupt_data_crc.tfrecord")
    it = iter(sl.TFRecordDataset(path))
    assert len([next(it) for _ in range(3)]) == 3  # the records before the damage
    with pytest.raises(sl.DataLossError) as raised:
        next(it)
    message = str(raised.value)
    # TensorFlow: "corrupted record at <payload offset>"; record 3's payload starts 12 bytes in.
    assert path in message and f"corrupted record at {offsets()[3] + 12}" in message
    assert "(record 3)" in message
    assert isinstance(raised.value, OSError) and isinstance(raised.value, sl.Error)


def test_truncated_record_names_the_record_start():
    path = str(TF_DATA / "truncated.tfrecord")
    with pytest.raises(sl.DataLossError, match=f"truncated record at {offsets()[7]}"):
        list(sl.TFRecordDataset(path))


def test_wrong_compression_is_a_data_loss_error():
    with pytest.raises(sl.DataLossError, match="inflate"):
        list(sl.TFRecordDataset(str(TF_DATA / "plain.tfrecord"), compression_type="GZIP"))


def test_missing_file_is_not_found_naming_it():
    with pytest.raises(sl.NotFoundError) as raised:
        list(sl.TFRecordDataset("/nonexistent/dir/train-0.tfrecord"))
    assert "/nonexistent/dir/train-0.tfrecord" in str(raised.value)
    assert isinstance(raised.value, FileNotFoundError)


def test_a_map_functions_exception_is_raised_as_itself():
    class Mine(Exception):
        pass

    def f(x):
        if x == 3:
            raise Mine(f"bad element {x}")
        return x

    for parallel in (None, 2):
        it = iter(sl.Dataset.range(5).map(f, num_parallel_calls=parallel))
        assert [int(next(it)) for _ in range(3)] == [0, 1, 2]
        with pytest.raises(Mine, match="bad element 3"):
            next(it)


def test_a_generators_exception_is_raised_as_itself():
    def gen():
        yield 1
        raise RuntimeError("generator broke")

    it = iter(sl.Dataset.from_generator(gen))
    assert next(it) == 1
    with pytest.raises(RuntimeError, match="generator broke"):
        next(it)


def test_unconvertible_results_are_type_errors():
    with pytest.raises(TypeError, match="cannot convert an object of type object to a tensor"):
        list(sl.Dataset.range(1).map(lambda x: object()))


def test_batching_different_shapes_is_tensorflows_error():
    ds = sl.Dataset.range(1, 4).map(lambda n: [7] * n).batch(3)
    with pytest.raises(sl.Error, match="Cannot batch tensors with different shapes in component 0"):
        list(ds)


@pytest.mark.parametrize(
    "build, words",
    [
        (lambda: sl.Dataset.range(3).batch(0), "batch_size must be greater than zero"),
        (lambda: sl.Dataset.range(3).shuffle(0), "buffer_size must be greater than zero"),
        (lambda: sl.Dataset.range(3).shard(0, 0), "Number of shards must be greater than zero"),
        (lambda: sl.Dataset.range(3).map(abs, num_parallel_calls=0), "num_parallel_calls"),
        (lambda: sl.Dataset.range(3).prefetch(-5), "buffer_size"),
        (lambda: sl.TFRecordDataset("x", compression_type="LZ4"), "Unsupported compression_type"),
        # Huge levels are refused, not attempted (each is a thread or a slot made up front).
        (
            lambda: sl.Dataset.range(3).interleave(sl.Dataset.range, cycle_length=2**40),
            "cycle_length must be at most 65536",
        ),
        (lambda: sl.Dataset.range(3).map(abs, num_parallel_calls=2**40), "num_parallel_calls"),
    ],
)
def test_bad_arguments_are_invalid_argument_errors(build, words):
    with pytest.raises(sl.InvalidArgumentError, match=words) as raised:
        build()
    assert isinstance(raised.value, ValueError)


def test_ignore_errors_abandons_a_damaged_file_and_goes_on_with_the_next():
    # TensorFlow: the records before the damage, then every record of the next file.
    files = [str(TF_DATA / "corrupt_data_crc.tfrecord"), str(TF_DATA / "plain.tfrecord")]
    records = list(sl.TFRecordDataset(files).ignore_errors())
    plain = list(sl.TFRecordDataset(files[1:]))
    assert records == plain[:3] + plain


def test_a_huge_padded_shape_is_an_error_not_a_crash():
    ds = sl.Dataset.range(3).map(lambda x: [x]).padded_batch(2, padded_shapes=[2**60])
    with pytest.raises(sl.InvalidArgumentError, match="padded_batch: cannot allocate"):
        list(ds)
