"""Element types, named as ``tf.dtypes``' (``sl.int64`` for ``tf.int64``).

Each is a :class:`DType`: a ``str`` holding numpy's name of the type (``"int64"``,
``"float32"``; ``"string"`` for ``tf.string``), so it can be passed wherever a type name is
taken, and told apart from a string *value* where both are taken (``CsvDataset``'s
``record_defaults``: ``sl.string`` is a required string column, ``"x"`` a column whose
default is ``"x"``).
"""


class DType(str):
    """A tensor's element type (``tf.dtypes.DType``), by numpy's name."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"sl.{self if self != 'bool' else 'bool_'}"


bool_ = DType("bool")
int8 = DType("int8")
int16 = DType("int16")
int32 = DType("int32")
int64 = DType("int64")
uint8 = DType("uint8")
uint16 = DType("uint16")
uint32 = DType("uint32")
uint64 = DType("uint64")
float16 = DType("float16")
float32 = DType("float32")
float64 = DType("float64")
string = DType("string")


def as_dtype(dtype) -> DType:
    """``tf.as_dtype``: a :class:`DType` from one, from a name, or from a numpy type
    (``np.int64``, ``np.dtype("float32")``; ``bytes``, ``str`` and ``object`` are
    ``string``)."""
    import numpy as np

    if isinstance(dtype, DType):
        return dtype
    if dtype in (bytes, str, object, np.bytes_, np.str_) or dtype in ("string", "bytes", "str"):
        return string
    name = getattr(dtype, "name", None)
    if name == "string":  # a TensorFlow dtype
        return string
    try:
        return DType(np.dtype(dtype).name)
    except TypeError as e:
        raise TypeError(f"not an element type: {dtype!r}") from e
