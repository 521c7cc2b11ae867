"""The exceptions streamload raises, named as ``tf.errors``' classes.

Each is a :class:`streamload.errors.Error` and also the builtin exception that fits, so
``except ValueError`` or ``except OSError`` catch them too. The message is the Rust error's,
with its context (the file and the record). An exception raised by your own function
(``map``, ``filter``, ``from_generator``) is raised again as itself.
"""


class Error(Exception):
    """Base class of streamload's errors (``tf.errors.OpError``)."""


class InvalidArgumentError(Error, ValueError):
    """A bad argument or bad input data (``tf.errors.InvalidArgumentError``)."""


class DataLossError(Error, OSError):
    """Corrupt or truncated data: a bad checksum, a cut record (``tf.errors.DataLossError``)."""


class NotFoundError(Error, FileNotFoundError):
    """A file, object or pattern that matches nothing (``tf.errors.NotFoundError``)."""


class PermissionDeniedError(Error, PermissionError):
    """Access refused (``tf.errors.PermissionDeniedError``)."""


class CheckpointError(Error, ValueError):
    """A checkpoint that cannot be taken (a stage that cannot save its position) or that
    belongs to another recipe."""


__all__ = [
    "Error",
    "InvalidArgumentError",
    "DataLossError",
    "NotFoundError",
    "PermissionDeniedError",
    "CheckpointError",
]
