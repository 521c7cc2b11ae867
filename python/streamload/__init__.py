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
    if isinstance(filenames, (str, bytes, os.PathLike)):
        filenames = [os.fsdecode(filenames)]
    elif not isinstance(filenames, Dataset):
        filenames = [os.fsdecode(f) for f in filenames]
    return Dataset.tfrecord(filenames, compression_type, buffer_size, num_parallel_reads)



__all__ = [
    "AUTOTUNE",
    "INFINITE_CARDINALITY",
    "UNKNOWN_CARDINALITY",
    "Dataset",
    "FixedLenFeature",
    "Iterator",
    "TFRecordDataset",
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
