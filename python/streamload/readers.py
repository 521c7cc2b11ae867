"""The file readers, with tf.data's names and keyword arguments.

Every reader takes ``filenames`` as a path, a list of paths or URLs (``s3://``, ``gs://``,
``az://``, ``http(s)://``: object storage, with the credentials the Rust crate finds in the
environment), or a dataset of names (:func:`streamload.list_files`). With
``num_parallel_reads`` (or ``AUTOTUNE``) that many files are read at once and their elements
interleaved, one at a time, in a deterministic order. ``buffer_size`` is the bytes read from
a file at a time; ``compression_type`` is ``""``/``None``, ``"GZIP"``, ``"ZLIB"`` or
``"AUTO"`` (by each file's extension: ``.gz``, ``.zz``). Reading and decoding run in Rust,
without the GIL; an error names the file and the record (or line).
"""

import os
from collections.abc import Iterable, Sequence

from . import _native
from ._native import Dataset
from .dtypes import as_dtype

Filenames = "str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | Dataset"


def _names(filenames):
    """A path, a list of paths, or a dataset of names, as the readers take them."""
    if isinstance(filenames, (str, bytes, os.PathLike)):
        return [os.fsdecode(filenames)]
    if isinstance(filenames, Dataset):
        return filenames
    return [os.fsdecode(f) for f in filenames]


def TFRecordDataset(
    filenames: Filenames,
    compression_type: "str | None" = None,
    buffer_size: "int | None" = None,
    num_parallel_reads: "int | None" = None,
) -> Dataset:
    """``tf.data.TFRecordDataset``: the records of TFRecord files, as ``bytes``.

    Records are checked (CRC32C) as TensorFlow checks them; damage raises
    :class:`~streamload.errors.DataLossError` naming the file and the offset.
    """
    return _native.read(
        "tfrecord", _names(filenames), compression_type, buffer_size, num_parallel_reads
    )


def TextLineDataset(
    filenames: Filenames,
    compression_type: "str | None" = None,
    buffer_size: "int | None" = None,
    num_parallel_reads: "int | None" = None,
) -> Dataset:
    """``tf.data.TextLineDataset``: the lines of text files, as ``bytes`` without their line
    ends (every ``\\r`` dropped, as TensorFlow does)."""
    return _native.read(
        "text_line", _names(filenames), compression_type, buffer_size, num_parallel_reads
    )


def FixedLengthRecordDataset(
    filenames: Filenames,
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
    return _native.fixed_length_record_dataset(
        _names(filenames),
        record_bytes,
        header_bytes,
        footer_bytes,
        buffer_size,
        compression_type,
        num_parallel_reads,
    )


def JsonLinesDataset(
    filenames: Filenames,
    compression_type: "str | None" = "AUTO",
    buffer_size: "int | None" = None,
    num_parallel_reads: "int | None" = None,
) -> Dataset:
    """The values of JSON-lines files (``.jsonl``, ``.ndjson``), one per line, as tensors:
    an object is a dict, an integer ``int64`` (``uint64`` past its range), a float
    ``float32``, a string ``bytes``, ``true``/``false`` ``bool``, a list of one shape an
    array with one more dimension (integers among floats: ``float32``; a list of objects: an
    object of lists). A blank line is skipped (as pandas' ``read_json(lines=True)`` does).

    A line that is not JSON, holds a ``null`` or a ragged list raises
    :class:`~streamload.errors.InvalidArgumentError` naming the file, the line (from 1), the
    column in it and the key (``train.jsonl: line 7, column 15: key "b": null is not a
    tensor ...``);
    the lines after it follow (``ignore_errors()`` skips just the bad ones). Compressed files
    are read by their extension (``compression_type="AUTO"``)."""
    return _native.read(
        "json_lines", _names(filenames), compression_type, buffer_size, num_parallel_reads
    )


def WebDataset(
    urls: Filenames,
    compression_type: "str | None" = "AUTO",
    buffer_size: "int | None" = None,
    num_parallel_reads: "int | None" = None,
) -> Dataset:
    """``webdataset.WebDataset``: the samples of tar shards, each a dict of ``__key__``,
    ``__url__`` and one ``bytes`` per member by its extension (``{"__key__": b"000017",
    "jpg": b"...", "cls": b"3"}``), as ``webdataset`` groups them (``dir/000017.seg.png``
    is key ``dir/000017``, field ``seg.png``). Keys and URLs are ``bytes`` here. ``.tar.gz``
    and ``.tgz`` shards are read by their extension. Decode fields in the pipeline:
    ``ds.map(...)``, or batch and hand the bytes to :meth:`Dataset.decode_jpeg` where there
    is one."""
    return _native.read(
        "webdataset", _names(urls), compression_type, buffer_size, num_parallel_reads
    )


def ParquetDataset(
    filenames: Filenames,
    columns: "Sequence[str] | None" = None,
    batch_size: int = 1024,
    num_parallel_reads: "int | None" = None,
    exclude_cols: "Sequence[str] | None" = None,
    ragged: bool = False,
) -> Dataset:
    """Parquet files as batches of rows: each element a dict of ``columns`` (default all),
    each a numpy array with one row per row of the batch. ``exclude_cols`` names columns
    to leave out instead (as ``tf.data.experimental.CsvDataset``'s; not with
    ``columns``): they are not fetched, so a column with nulls or ragged lists can be left
    out this way; a name that is no column raises
    :class:`~streamload.errors.InvalidArgumentError` naming the file.

    A batch holds at most ``batch_size`` rows of one row group (the last of each row group
    is shorter); ``.unbatch()`` gives rows, ``.unbatch().batch(n)`` batches of exactly ``n``.
    Row groups are interleaved across files (row group 0 of each file, then row group 1, ...)
    and ``num_parallel_reads`` of them (default: one per core) fetched and decoded at once;
    only the columns asked for are fetched. Numbers and booleans keep their type
    (``float16`` becomes ``float32``), strings and binaries are ``bytes``, fixed-size lists
    and lists of one length are one more dimension. A null, a ragged list or another Arrow
    type raises :class:`~streamload.errors.InvalidArgumentError` naming the file (as given),
    the row in it (from 0, counted from the file's first row across its row groups, whatever
    ``columns``, shard or rank) and the column (``data/b.parquet: row 137: column `label`: a
    null ...``; for a type, the batch's rows: ``rows 0..1024``); leave such a column out with
    ``columns=`` or ``exclude_cols=``. Checkpoints resume at the row.

    With ``ragged=True``, a list column whose rows differ in length (token ids, a list per
    document) is a :class:`~streamload.ragged.RaggedTensorValue` of its values and
    ``int64`` row splits (what ``tf.data`` gives for a ragged tensor) rather than an error;
    ``.unbatch()`` gives each row's 1-D array, ready for ``pack(..., key=)``. Lists of
    lists of several lengths are still an error."""
    if isinstance(columns, str):
        columns = [columns]
    if isinstance(exclude_cols, str):
        exclude_cols = [exclude_cols]
    return _native.parquet_dataset(
        _names(filenames),
        None if columns is None else list(columns),
        batch_size,
        num_parallel_reads,
        None if exclude_cols is None else list(exclude_cols),
        ragged,
    )


def HDF5Dataset(
    filenames: Filenames,
    dataset: str,
    dtype,
    labels: "str | None" = None,
    labels_dtype=None,
    slices: "int | None" = None,
    field: "str | None" = None,
    fill_missing_chunks: bool = False,
    num_parallel_reads: "int | None" = None,
) -> Dataset:
    """The rows of the HDF5 dataset at path ``dataset`` (``"/scenes/points"``) of each
    file, as numpy arrays of ``dtype`` (``sl.float32``, ``np.int16``, ...; ``float16`` is
    read as ``float32``; ``sl.string`` for string datasets, as ``bytes``), read by a
    pure-Rust HDF5 reader (no libhdf5, so no global lock: files and chunks are read and
    decompressed in parallel).

    With ``labels`` (the path of a dataset of as many rows, of ``labels_dtype``: ``int32``,
    ``int64``, ``uint8``, ``float32`` or ``float64``) each element is ``(row, label)``. With
    ``slices=k`` each element is ``k`` rows (the last of each file fewer). ``field`` reads one
    field of a compound dataset (h5py's ``dataset["x"]``). A chunk the file does not store
    is an error (a damaged index would otherwise read as zeros) unless
    ``fill_missing_chunks=True`` reads it as the fill value, as h5py does. Blocks of rows
    are interleaved across files (block 0 of each file, then block 1, ...), and
    ``num_parallel_reads`` (default: one per core) read at once. A dataset of another type,
    a missing dataset, or labels of another length raise an error naming the file."""
    return _native.hdf5_dataset(
        _names(filenames),
        dataset,
        as_dtype(dtype),
        labels,
        None if labels_dtype is None else as_dtype(labels_dtype),
        slices,
        field,
        fill_missing_chunks,
        num_parallel_reads,
    )


class MegatronDataset:
    """Megatron-LM indexed datasets: the ``.bin`` + ``.idx`` pairs named by ``prefixes``
    (``"data/corpus"`` for ``data/corpus.bin`` and ``data/corpus.idx``; local paths or
    URLs), the format most pretraining corpora ship in. Each pair is checked when opened
    (header, version, token type, the index against its ``.bin``): a damaged or mismatched
    pair raises an error naming the file. Documents are numbered across the pairs in order.

    ``num_documents``; ``read_document(n)``: document ``n``'s token ids as a ``uint32``
    array; ``documents(shuffle_seed=None, num_shards=1, index=0, num_parallel_reads=None)``:
    a :class:`Dataset` of them, in order or shuffled per epoch from the seed, only every
    ``num_shards``-th document from ``index``; its checkpoints are a few bytes, and a pair
    that changed refuses one."""

    def __init__(self, prefixes: "str | Sequence[str]"):
        self._native = _native.MegatronDataset(_names(prefixes))

    @property
    def num_documents(self) -> int:
        return self._native.num_documents

    def read_document(self, number: int):
        return self._native.read_document(number)

    def documents(
        self,
        shuffle_seed: "int | None" = None,
        num_shards: int = 1,
        index: int = 0,
        num_parallel_reads: "int | None" = None,
    ) -> Dataset:
        return self._native.documents(shuffle_seed, num_shards, index, num_parallel_reads)

