"""``tf.data.experimental``'s readers: :func:`CsvDataset` and :func:`make_csv_dataset`."""

import csv
import io
import os
from collections.abc import Sequence

import numpy as np

from . import _native
from ._native import AUTOTUNE, Dataset
from .dtypes import DType, as_dtype
from .readers import Filenames, TextLineDataset, _names

_CSV_TYPES = ("int32", "int64", "float32", "float64", "string")


def _record_default(default):
    """One entry of ``record_defaults`` as ``(dtype, default or None)``.

    As TensorFlow reads them: a type (``sl.int64``, ``np.float32``, ``str``) is a required
    column of that type; a value, or a list or array of one value, is an optional column of
    its type whose empty fields take it (a Python ``int`` is ``int32``, a ``float``
    ``float32``, as ``tf.constant`` makes them); an empty list or array is a required column
    of its type."""
    if isinstance(default, (DType, type, np.dtype)):
        return str(as_dtype(default)), None
    if isinstance(default, (list, tuple, np.ndarray)):
        if len(default) == 0:
            dtype = np.asarray(default).dtype if isinstance(default, np.ndarray) else np.float32
            return str(as_dtype(dtype)), None
        if len(default) != 1:
            raise ValueError(
                f"a record default holds one value, got {len(default)}: {default!r}"
            )
        return _record_default(default[0])
    if isinstance(default, (bool, np.bool_)):
        raise TypeError("a CSV column is float32, float64, int32, int64 or string, not bool")
    if isinstance(default, (str, bytes, np.bytes_, np.str_)):
        return "string", default if isinstance(default, (str, bytes)) else default.item()
    if isinstance(default, np.generic):
        return str(as_dtype(default.dtype)), default.item()
    if isinstance(default, int):
        return "int32", default
    if isinstance(default, float):
        return "float32", default
    raise TypeError(f"not a record default: {default!r}")


def CsvDataset(
    filenames: Filenames,
    record_defaults: Sequence,
    compression_type: "str | None" = None,
    buffer_size: "int | None" = None,
    header: bool = False,
    field_delim: str = ",",
    use_quote_delim: bool = True,
    na_value: str = "",
    select_cols: "Sequence[int] | None" = None,
    exclude_cols: "Sequence[int] | None" = None,
    num_parallel_reads: "int | None" = None,
) -> Dataset:
    """``tf.data.experimental.CsvDataset``: each record of CSV files as a tuple of numpy
    scalars, one per column, parsed by TensorFlow's rules (its quoting, its number syntax,
    its errors and messages).

    ``record_defaults`` gives each column's type: ``sl.int32``, ``sl.int64``,
    ``sl.float32``, ``sl.float64`` or ``sl.string`` (or numpy's types) for a required column,
    a value (``0``, ``[0.5]``, ``"n/a"``, ``np.int64(0)``) for a column whose empty or
    ``na_value`` fields take it. ``header=True`` skips each file's first line.
    ``select_cols`` (ascending, one per default) reads only those columns;
    ``exclude_cols`` (ascending) reads every other column, so a record has as many fields
    as ``record_defaults`` and ``exclude_cols`` together. A bad field raises
    :class:`~streamload.errors.InvalidArgumentError` naming the file and the record.
    """
    columns = [_record_default(d) for d in record_defaults]
    return _native.csv_dataset(
        _names(filenames),
        columns,
        compression_type,
        buffer_size,
        header,
        field_delim,
        use_quote_delim,
        na_value,
        None if select_cols is None else [int(c) for c in select_cols],
        None if exclude_cols is None else [int(c) for c in exclude_cols],
        num_parallel_reads,
    )


def _infer_type(values, na_value):
    """TensorFlow's inference of a column's type from some of its fields: the narrowest of
    int32, int64, float32, float64 (wider only when a value does not fit), else string."""
    kinds = ["int32", "int64", "float32", "float64", "string"]
    k = 0
    for v in values:
        if v == "" or v == na_value:
            continue
        while k < 4:
            try:
                if kinds[k] == "int32" and -(2**31) <= int(v) < 2**31:
                    break
                if kinds[k] == "int64" and -(2**63) <= int(v) < 2**63:
                    break
                if kinds[k] == "float32" and abs(float(v)) <= float(np.finfo(np.float32).max):
                    break
                if kinds[k] == "float64":
                    float(v)
                    break
            except ValueError:
                pass
            k += 1
    return kinds[k]


def make_csv_dataset(
    file_pattern,
    batch_size: int,
    column_names: "Sequence[str] | None" = None,
    column_defaults: "Sequence | None" = None,
    label_name: "str | None" = None,
    select_columns: "Sequence[str | int] | None" = None,
    field_delim: str = ",",
    use_quote_delim: bool = True,
    na_value: str = "",
    header: bool = True,
    num_epochs: "int | None" = None,
    shuffle: bool = True,
    shuffle_buffer_size: int = 10000,
    shuffle_seed: "int | None" = None,
    prefetch_buffer_size: "int | None" = None,
    num_parallel_reads: "int | None" = None,
    sloppy: bool = False,
    num_rows_for_inference: int = 100,
    compression_type: "str | None" = None,
    ignore_errors: bool = False,
    encoding: str = "utf-8",
) -> Dataset:
    """``tf.data.experimental.make_csv_dataset``: batches of CSV records as a dict of
    columns by name (numpy arrays of ``batch_size`` rows), or ``(features, label)`` with
    ``label_name``.

    As TensorFlow does: the files matching ``file_pattern`` (a glob, a URL glob, or a list
    of names) are read ``num_parallel_reads`` at once (default 1), records shuffled in a
    buffer of ``shuffle_buffer_size`` and repeated ``num_epochs`` times (``None``: forever),
    then batched (the last batch may be short) and prefetched. Column names come from the
    header of the first file unless given; column types are inferred from its first
    ``num_rows_for_inference`` rows unless ``column_defaults`` gives them (as
    :func:`CsvDataset`'s ``record_defaults``). ``select_columns`` (names or indices) keeps
    only those. ``sloppy`` is taken for porting (the order is deterministic).
    """
    del sloppy  # the order is always deterministic
    if encoding.lower().replace("-", "") not in ("utf8",):
        raise ValueError(f"make_csv_dataset: only UTF-8 files are read, not {encoding}")
    if isinstance(file_pattern, (str, bytes, os.PathLike)):
        patterns = [os.fsdecode(file_pattern)]
    else:
        patterns = [os.fsdecode(p) for p in file_pattern]
    filenames = []
    for pattern in patterns:
        found = [bytes(n).decode() for n in _native.list_files(pattern, False, None)]
        if not found:
            raise ValueError(f"make_csv_dataset: no files match {pattern}")
        filenames.extend(found)
    first = filenames[0]

    rows = None
    if column_names is None or column_defaults is None:
        lines = TextLineDataset(first, compression_type=compression_type).take(
            num_rows_for_inference + (1 if header else 0)
        )
        text = "\n".join(bytes(line).decode("utf-8") for line in lines)
        reader = csv.reader(
            io.StringIO(text),
            delimiter=field_delim,
            quoting=csv.QUOTE_MINIMAL if use_quote_delim else csv.QUOTE_NONE,
        )
        rows = list(reader)
    if column_names is None:
        if not header:
            raise ValueError("make_csv_dataset: column_names are needed when header=False")
        if not rows:
            raise ValueError(f"make_csv_dataset: {first} has no header")
        column_names = rows[0]
    column_names = list(column_names)
    if len(set(column_names)) != len(column_names):
        raise ValueError("make_csv_dataset: column names must be unique")

    if select_columns is not None:
        select = []
        for c in select_columns:
            if isinstance(c, str):
                if c not in column_names:
                    raise ValueError(f"make_csv_dataset: no column named {c!r}")
                select.append(column_names.index(c))
            else:
                select.append(int(c))
        select = sorted(set(select))
    else:
        select = None
    names = column_names if select is None else [column_names[i] for i in select]
    if label_name is not None and label_name not in names:
        raise ValueError(f"make_csv_dataset: label_name {label_name!r} is not a column")

    if column_defaults is None:
        body = rows[1:] if header else rows
        indices = select if select is not None else range(len(column_names))
        column_defaults = [
            DType(_infer_type([r[i] for r in body if i < len(r)], na_value)) for i in indices
        ]
    elif select is not None and len(column_defaults) == len(column_names):
        column_defaults = [column_defaults[i] for i in select]

    ds = Dataset.from_tensor_slices(np.array(filenames, dtype=object))
    if shuffle:
        ds = ds.shuffle(len(filenames), seed=shuffle_seed)
    ds = CsvDataset(
        ds,
        column_defaults,
        compression_type=compression_type,
        header=header,
        field_delim=field_delim,
        use_quote_delim=use_quote_delim,
        na_value=na_value,
        select_cols=select,
        num_parallel_reads=num_parallel_reads,
    )
    if ignore_errors:
        ds = ds.ignore_errors()
    if shuffle:
        ds = ds.shuffle(shuffle_buffer_size, seed=shuffle_seed)
    if num_epochs != 1:
        ds = ds.repeat(num_epochs)
    ds = ds.batch(batch_size)

    def to_dict(*columns):
        features = dict(zip(names, columns))
        if label_name is None:
            return features
        label = features.pop(label_name)
        return features, label

    ds = ds.map(to_dict)
    return ds.prefetch(AUTOTUNE if prefetch_buffer_size is None else prefetch_buffer_size)


__all__ = ["CsvDataset", "make_csv_dataset"]
