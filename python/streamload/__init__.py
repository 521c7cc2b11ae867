"""streamload: tf.data-style input pipelines run in Rust, for Python training loops.

A :class:`Dataset` is a re-iterable recipe with tf.data's names and keyword arguments;
iterating it runs the recipe in Rust (reading, parsing, shuffling, batching without the GIL)
and hands each element over as numpy arrays that own the Rust buffers (no copy)::

    import streamload as sl

    ds = (sl.TFRecordDataset(sl.list_files("data/train-*.tfrecord"), num_parallel_reads=4)
            .shuffle(10_000, seed=7)
            .batch(256)
            .parse_example({"label": sl.FixedLenFeature([], sl.int64)})
            .prefetch(2))
    it = iter(ds)
    for batch in it:          # {"label": numpy.ndarray of shape (256,)}
        ...
    state = it.checkpoint()   # bytes; ds.iter_from(state) goes on from there
"""

import os
from collections.abc import Iterable

from . import errors
from ._native import (
    AUTOTUNE,
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Dataset,
    FixedLenFeature,
    Iterator,
)
from ._native import list_files as _list_files
from .options import AutotuneOptions, Options
from .errors import (
    CheckpointError,
    DataLossError,
    Error,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
)

#: ``tf.int64``, ``tf.float32``, ``tf.string``: the types ``FixedLenFeature`` takes.
int64 = "int64"
float32 = "float32"
string = "string"


def list_files(
    file_pattern: "str | os.PathLike[str]", shuffle: "bool | None" = None, seed: "int | None" = None
) -> Dataset:
    """``tf.data.Dataset.list_files``: the names of the files matching a glob (a local path
    or an object-storage URL such as ``s3://bucket/train-*.tfrecord``), as ``bytes``.
    Shuffled unless ``shuffle=False``, as in tf.data; by ``seed`` when given."""
    return _list_files(os.fsdecode(file_pattern), shuffle, seed)


def TFRecordDataset(
    filenames: "str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | Dataset",
    compression_type: "str | None" = None,
    buffer_size: "int | None" = None,
    num_parallel_reads: "int | None" = None,
) -> Dataset:
    """``tf.data.TFRecordDataset``: the records of TFRecord files, as ``bytes``.

    ``filenames`` is a path, a list of paths or URLs, or a dataset of names
    (:func:`list_files`). ``compression_type`` is ``None``/``""``, ``"GZIP"`` or ``"ZLIB"``.
    With ``num_parallel_reads`` (or ``AUTOTUNE``) that many files are read at once and their
    records interleaved, one at a time, in a deterministic order. Records are checked
    (CRC32C) as TensorFlow checks them; damage raises :class:`DataLossError` naming the file
    and the offset.
    """
    return Dataset.tfrecord(_names(filenames), compression_type, buffer_size, num_parallel_reads)



def _names(filenames):
    """A path, a list of paths, or a dataset of names, as the readers take them."""
    if isinstance(filenames, (str, bytes, os.PathLike)):
        return [os.fsdecode(filenames)]
    if isinstance(filenames, Dataset):
        return filenames
    return [os.fsdecode(f) for f in filenames]


def TextLineDataset(
    filenames: "str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | Dataset",
    compression_type: "str | None" = None,
    buffer_size: "int | None" = None,
    num_parallel_reads: "int | None" = None,
) -> Dataset:
    """``tf.data.TextLineDataset``: the lines of text files, as ``bytes`` without their line
    ends (every ``\\r`` dropped, as TensorFlow does). Arguments as :func:`TFRecordDataset`."""
    return Dataset.text_line(_names(filenames), compression_type, buffer_size, num_parallel_reads)


def FixedLengthRecordDataset(
    filenames: "str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | Dataset",
    record_bytes: int,
    header_bytes: "int | None" = None,
    footer_bytes: "int | None" = None,
    buffer_size: "int | None" = None,
    compression_type: "str | None" = None,
    num_parallel_reads: "int | None" = None,
) -> Dataset:
    """``tf.data.FixedLengthRecordDataset``: records of ``record_bytes`` bytes between a
    header and a footer of each file; a body that is not whole records raises TensorFlow's
    error."""
    return Dataset.fixed_length_record(
        _names(filenames),
        record_bytes,
        header_bytes,
        footer_bytes,
        buffer_size,
        compression_type,
        num_parallel_reads,
    )


__all__ = [
    "AUTOTUNE",
    "INFINITE_CARDINALITY",
    "UNKNOWN_CARDINALITY",
    "Dataset",
    "Options",
    "AutotuneOptions",
    "FixedLenFeature",
    "Iterator",
    "TFRecordDataset",
    "TextLineDataset",
    "FixedLengthRecordDataset",
    "list_files",
    "int64",
    "float32",
    "string",
    "errors",
    "Error",
    "InvalidArgumentError",
    "DataLossError",
    "NotFoundError",
    "PermissionDeniedError",
    "CheckpointError",
]
