"""``RaggedTensorValue``: a ragged tensor as numpy arrays (a batch of ``RaggedFeature``'s
values)."""

from typing import NamedTuple

import numpy as np


class RaggedTensorValue(NamedTuple):
    """``tf.compat.v1.ragged.RaggedTensorValue``: what ``as_numpy_iterator`` gives for a
    ``tf.RaggedTensor`` with one ragged dimension. Row ``i`` is
    ``values[row_splits[i]:row_splits[i + 1]]``; ``values`` is ``(n,)`` (an object array of
    ``bytes`` for strings, or ``PackedStrings`` with ``strings="packed"``), ``row_splits``
    ``(nrows + 1,)`` ``int32`` (``RaggedFeature``'s default ``row_splits_dtype``, as
    TensorFlow's) or ``int64``. ``unbatch`` gives its rows (1-D arrays); ``batch`` of one is
    an error (tf.data would add a ragged dimension)."""

    values: np.ndarray
    row_splits: np.ndarray

    @property
    def flat_values(self) -> np.ndarray:
        """The values (one ragged dimension: ``values`` itself)."""
        return self.values

    @property
    def nested_row_splits(self) -> tuple:
        """``(row_splits,)``."""
        return (self.row_splits,)

    @property
    def ragged_rank(self) -> int:
        """1."""
        return 1

    def nrows(self) -> int:
        """The number of rows."""
        return len(self.row_splits) - 1

    def row_lengths(self) -> np.ndarray:
        """Each row's length (``np.diff(row_splits)``)."""
        return np.diff(self.row_splits)

    def to_list(self) -> list:
        """``tf.RaggedTensor.to_list``: the rows as Python lists."""
        values = self.values
        if hasattr(values, "to_numpy"):  # PackedStrings
            values = values.to_numpy()
        values = list(np.asarray(values).tolist())
        splits = [int(s) for s in self.row_splits]
        return [values[a:b] for a, b in zip(splits, splits[1:])]
