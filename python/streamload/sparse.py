"""``SparseTensorValue``: a sparse tensor as numpy arrays (``VarLenFeature``'s values)."""

from typing import NamedTuple

import numpy as np


class SparseTensorValue(NamedTuple):
    """``tf.compat.v1.SparseTensorValue``: what ``as_numpy_iterator`` gives for a
    ``tf.SparseTensor``. ``indices`` is ``(n, rank)`` int64, ``values`` ``(n,)``,
    ``dense_shape`` ``(rank,)`` int64. A ``map`` function may return one (it stays sparse);
    ``batch`` batches them as tf.data does (each row's element index first, the dense shape
    the largest of each dimension)."""

    indices: np.ndarray
    values: np.ndarray
    dense_shape: np.ndarray

    def to_dense(self, default_value=0) -> np.ndarray:
        """``tf.sparse.to_dense``: the dense array, ``default_value`` where no value is."""
        dense = np.full(
            tuple(self.dense_shape),
            default_value,
            dtype=self.values.dtype if self.values.dtype != object else object,
        )
        if len(self.values):
            dense[tuple(np.asarray(self.indices).T)] = self.values
        return dense
