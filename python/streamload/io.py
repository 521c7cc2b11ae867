"""``tf.io``'s file reading as a transform run in Rust without the GIL."""

from . import _native
from ._native import Transform


def read_file(key: "str | int | None" = None) -> Transform:
    """``tf.io.read_file(filename)``: a file's bytes, for :meth:`Dataset.map`. The file is a
    local path or an object-storage URL (one GET); a name or a 1-d array of them. A file that
    cannot be read raises an error naming it."""
    return _native.read_file(key)


__all__ = ["read_file"]
