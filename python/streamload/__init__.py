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
    FixedLenSequenceFeature,
    Iterator,
    RaggedFeature,
    SparseFeature,
    VarLenFeature,
)
from .ragged import RaggedTensorValue
from .sparse import SparseTensorValue
from .strings import PackedStrings, StringsView
from ._native import list_files as _list_files
from .options import AutotuneOptions, Options
from .dtypes import DType, bool_, float16, float32, float64, int8, int16, int32, int64, string
from .dtypes import uint8, uint16, uint32, uint64
from .readers import (
    FixedLengthRecordDataset,
    HDF5Dataset,
    JsonLinesDataset,
    MegatronDataset,
    ParquetDataset,
    TextLineDataset,
    TFRecordDataset,
    WebDataset,
)
from . import experimental, image, io, text
from .errors import (
    CheckpointError,
    DataLossError,
    Error,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
)



def list_files(
    file_pattern: "str | os.PathLike[str]", shuffle: "bool | None" = None, seed: "int | None" = None
) -> Dataset:
    """``tf.data.Dataset.list_files``: the names of the files matching a glob (a local path
    or an object-storage URL such as ``s3://bucket/train-*.tfrecord``), as ``bytes``.
    Shuffled unless ``shuffle=False``, as in tf.data; by ``seed`` when given."""
    return _list_files(os.fsdecode(file_pattern), shuffle, seed)


__all__ = [
    "AUTOTUNE",
    "INFINITE_CARDINALITY",
    "UNKNOWN_CARDINALITY",
    "Dataset",
    "Options",
    "AutotuneOptions",
    "FixedLenFeature",
    "VarLenFeature",
    "FixedLenSequenceFeature",
    "SparseFeature",
    "SparseTensorValue",
    "RaggedFeature",
    "RaggedTensorValue",
    "PackedStrings",
    "StringsView",
    "Iterator",
    "TFRecordDataset",
    "TextLineDataset",
    "FixedLengthRecordDataset",
    "JsonLinesDataset",
    "WebDataset",
    "ParquetDataset",
    "HDF5Dataset",
    "MegatronDataset",
    "experimental",
    "image",
    "io",
    "text",
    "list_files",
    "DType",
    "bool_",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "string",
    "errors",
    "Error",
    "InvalidArgumentError",
    "DataLossError",
    "NotFoundError",
    "PermissionDeniedError",
    "CheckpointError",
]
