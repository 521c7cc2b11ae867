"""``PackedStrings``: a string tensor as one buffer of bytes and offsets (``strings="packed"``);
``StringsView``: a string tensor whose strings are views of the parsed records
(``strings="view"``)."""

from typing import Any

import numpy as np

from ._native import StringsView

__all__ = ["PackedStrings", "StringsView"]


class PackedStrings:
    """A string tensor packed in one buffer, as Arrow's binary arrays and
    ``tf.RaggedTensor``'s ``values`` and ``row_splits`` lay strings out.

    ``parse_example(..., strings="packed")`` hands string tensors over in this form: the
    strings are copied once into one buffer on streamload's threads, without the GIL, and
    Python receives two numpy arrays that own the Rust buffers (no copy, no Python object
    per string). The default, ``strings="bytes"``, gives tf.data's form instead: an object
    array of ``bytes`` (one Python object made per string, with the GIL, on the thread
    that iterates).

    - ``values``: ``uint8``, every string's bytes one after another;
    - ``offsets``: ``int64``, ``size + 1`` of them: string ``i`` (row-major over ``shape``)
      is ``values[offsets[i]:offsets[i + 1]]``;
    - ``shape``: the string tensor's shape (``(256,)`` for a batch of 256 strings).

    ``ps[i]`` is string ``i`` of a 1-d tensor as ``bytes`` (row ``i`` of an n-d one, as
    ``PackedStrings``); ``ps.to_numpy()`` (or ``np.asarray(ps)``) is tf.data's object array
    of ``bytes``; ``ps.lengths()`` the strings' lengths. A ``map`` function may return one
    (it becomes a string tensor). ``torch.from_numpy(ps.values)`` shares the buffer too.
    """

    __slots__ = ("values", "offsets", "shape")

    def __init__(self, values: np.ndarray, offsets: np.ndarray, shape: "tuple[int, ...]"):
        self.values = values
        self.offsets = offsets
        self.shape = tuple(int(d) for d in shape)

    @classmethod
    def from_list(cls, strings: "Any") -> "PackedStrings":
        """Packs a (nested) list or array of ``bytes`` (``str`` as UTF-8)."""
        array = np.asarray(strings, dtype=object)
        items = [s.encode() if isinstance(s, str) else bytes(s) for s in array.ravel()]
        offsets = np.zeros(len(items) + 1, dtype=np.int64)
        np.cumsum([len(s) for s in items], out=offsets[1:])
        values = np.frombuffer(b"".join(items), dtype=np.uint8).copy()
        return cls(values, offsets, array.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of strings."""
        return len(self.offsets) - 1

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d PackedStrings")
        return self.shape[0]

    def lengths(self) -> np.ndarray:
        """Each string's length in bytes, in ``shape``."""
        return np.diff(self.offsets).reshape(self.shape)

    def __getitem__(self, i: int) -> "bytes | PackedStrings":
        n = len(self)
        if not isinstance(i, (int, np.integer)):
            raise TypeError(f"PackedStrings indices are integers, not {type(i).__name__}")
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"index {i} out of a PackedStrings of {n} rows")
        per_row = int(np.prod(self.shape[1:], dtype=np.int64))
        first, last = i * per_row, (i + 1) * per_row
        if len(self.shape) == 1:
            return self.values[self.offsets[first]:self.offsets[last]].tobytes()
        base = self.offsets[first]
        return PackedStrings(
            self.values[base:self.offsets[last]],
            self.offsets[first:last + 1] - base,
            self.shape[1:],
        )

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def to_numpy(self) -> np.ndarray:
        """tf.data's form: an object array of ``bytes`` in ``shape``."""
        data = self.values.tobytes()
        out = np.empty(self.size, dtype=object)
        bounds = self.offsets.tolist()
        for j in range(self.size):
            out[j] = data[bounds[j]:bounds[j + 1]]
        return out.reshape(self.shape)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self.to_numpy()
        return out if dtype is None else out.astype(dtype)

    def tolist(self) -> list:
        """The strings as (nested) lists of ``bytes``."""
        return self.to_numpy().tolist()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PackedStrings):
            return NotImplemented
        return (
            self.shape == other.shape
            and np.array_equal(self.offsets - self.offsets[0], other.offsets - other.offsets[0])
            and bytes(self.values[self.offsets[0]:self.offsets[-1]])
            == bytes(other.values[other.offsets[0]:other.offsets[-1]])
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"PackedStrings(shape={self.shape}, {len(self.values)} bytes, "
            f"first={self.to_numpy().ravel()[:3].tolist()!r}...)"
        )
