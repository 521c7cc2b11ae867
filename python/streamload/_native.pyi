"""Type stubs of the Rust extension ``streamload._native`` (re-exported by ``streamload``)."""

from collections.abc import Callable, Iterable, Sequence
from os import PathLike
from typing import Any, Final, Iterator as _Iterator, Literal

#: An element: numpy arrays and scalars, ``bytes``, and tuples and dicts of them.
Element = Any

AUTOTUNE: Final[int]
INFINITE_CARDINALITY: Final[int]
UNKNOWN_CARDINALITY: Final[int]

class StringsView:
    """A string tensor handed over without copying its strings (``parse_example(...,
    strings="view")``): ``view[i]`` is string ``i`` of a 1-d tensor as a read-only numpy
    ``uint8`` array over the record's bytes (row ``i`` of an n-d one as a ``StringsView``),
    kept alive by the array; ``lengths()`` the strings' lengths; ``to_numpy()`` (or
    ``np.asarray(view)``) tf.data's object array of ``bytes``. A ``map`` function may
    return one."""

    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def ndim(self) -> int: ...
    @property
    def size(self) -> int: ...
    def __len__(self) -> int: ...
    def __getitem__(self, i: int) -> Any: ...
    def lengths(self) -> Any: ...
    def to_numpy(self) -> Any: ...
    def __array__(self, dtype: Any = None, copy: bool | None = None) -> Any: ...

class FixedLenFeature:
    """``tf.io.FixedLenFeature(shape, dtype, default_value=None)``."""

    shape: list[int]
    dtype: str
    def __init__(
        self,
        shape: Iterable[int],
        dtype: str | type,
        default_value: Any | None = None,
    ) -> None: ...

class VarLenFeature:
    """``tf.io.VarLenFeature(dtype)``: parsed as a ``streamload.SparseTensorValue``."""

    dtype: str
    def __init__(self, dtype: str | type) -> None: ...

class FixedLenSequenceFeature:
    """``tf.io.FixedLenSequenceFeature(shape, dtype, allow_missing=False, default_value=None)``."""

    shape: list[int]
    dtype: str
    def __init__(
        self,
        shape: Iterable[int],
        dtype: str | type,
        allow_missing: bool = False,
        default_value: Any | None = None,
    ) -> None: ...

class SparseFeature:
    """``tf.io.SparseFeature(index_key, value_key, dtype, size, already_sorted=False)``:
    parsed as a ``streamload.SparseTensorValue`` of dense shape ``size`` (``[batch] + size``
    after ``batch``) whose indices are the int64 values of ``index_key`` (one key per
    dimension) and whose values are those of ``value_key``, paired in order and sorted by
    index unless ``already_sorted``. An index out of ``[0, size)`` or keys of different
    lengths raise ``InvalidArgumentError``."""

    index_key: list[str]
    value_key: str
    dtype: str
    size: list[int]
    already_sorted: bool
    def __init__(
        self,
        index_key: str | list[str],
        value_key: str,
        dtype: str | type,
        size: int | list[int],
        already_sorted: bool = False,
    ) -> None: ...

class RaggedFeature:
    """``tf.io.RaggedFeature(dtype, value_key=None, partitions=(), row_splits_dtype=int32,
    validate=False)`` without partitions: the values of the feature ``value_key`` (the
    spec's key when ``None``). One example parses to a 1-D array of its values; a batch (after
    ``batch``) to a ``streamload.RaggedTensorValue`` (``values``, ``row_splits``), one row per
    example, ``row_splits`` of ``row_splits_dtype`` (``int32``, TensorFlow's default, or
    ``int64``). A missing feature has no values; a list of another type raises
    ``InvalidArgumentError`` naming the key (and the record, in a batch). ``partitions``
    (more ragged dimensions) are not supported: any raise ``InvalidArgumentError``. A
    ``value_key`` read by another feature of the spec is refused (TensorFlow lets two
    ``RaggedFeature``s share one)."""

    dtype: str
    value_key: str | None
    partitions: tuple[()]
    row_splits_dtype: str
    validate: bool
    def __init__(
        self,
        dtype: str | type,
        value_key: str | None = None,
        partitions: Iterable[Any] = (),
        row_splits_dtype: str | type = "int32",
        validate: bool = False,
    ) -> None: ...

class Iterator(_Iterator[Element]):
    """One epoch of a :class:`Dataset`."""

    def __iter__(self) -> Iterator: ...
    def __next__(self) -> Element: ...
    def checkpoint(self) -> bytes:
        """The position after the last element returned; ``Dataset.iter_from`` resumes it."""
    def stats(self) -> str:
        """The per-stage report of this epoch so far."""
    def close(self) -> None:
        """Stops the epoch and every task it spawned."""
    def _last_buffer_addresses(self) -> list[int]: ...

class Dataset:
    """A re-iterable recipe of elements (``tf.data.Dataset``), run in Rust."""

    @staticmethod
    def range(*args: int) -> Dataset: ...
    @staticmethod
    def from_tensor_slices(tensors: Any) -> Dataset: ...
    @staticmethod
    def from_tensors(tensors: Any) -> Dataset: ...
    @staticmethod
    def from_generator(
        generator: Callable[..., Iterable[Any]],
        output_types: Any = None,
        output_shapes: Any = None,
        args: tuple[Any, ...] | None = None,
        output_signature: Any = None,
    ) -> Dataset: ...
    @staticmethod
    def list_files(
        file_pattern: str, shuffle: bool | None = None, seed: int | None = None
    ) -> Dataset: ...
    def map(
        self,
        map_func: Callable[..., Any] | Transform,
        num_parallel_calls: int | None = None,
        deterministic: bool | None = None,
        name: str | None = None,
    ) -> Dataset: ...
    def filter(self, predicate: Callable[..., Any]) -> Dataset: ...
    def take_while(self, predicate: Callable[..., Any]) -> Dataset: ...
    def ignore_errors(self) -> Dataset: ...
    def reduce(self, initial_state: Any, reduce_func: Callable[[Any, Any], Any]) -> Any: ...
    def interleave(
        self,
        map_func: Callable[..., Dataset],
        cycle_length: int | None = None,
        block_length: int | None = None,
        num_parallel_calls: int | None = None,
        deterministic: bool | None = None,
        name: str | None = None,
    ) -> Dataset: ...
    def flat_map(self, map_func: Callable[..., Dataset]) -> Dataset: ...
    @staticmethod
    def zip(datasets: tuple[Dataset, ...] | dict[str, Dataset]) -> Dataset: ...
    @staticmethod
    def sample_from_datasets(
        datasets: list[Dataset],
        weights: list[float] | None = None,
        seed: int | None = None,
        stop_on_empty_dataset: bool = False,
        rerandomize_each_iteration: bool | None = None,
    ) -> Dataset: ...
    @staticmethod
    def mix(
        datasets: list[Dataset],
        weights: list[float] | list[tuple[int, list[float]]],
        seed: int | None = None,
        interpolate: bool = False,
        over_tokens: bool = False,
        key: str | int | None = None,
        start_step: int = 0,
    ) -> Dataset: ...
    @staticmethod
    def choose_from_datasets(
        datasets: list[Dataset],
        choice_dataset: Dataset,
        stop_on_empty_dataset: bool = True,
    ) -> Dataset: ...
    def concatenate(self, dataset: Dataset) -> Dataset: ...
    def enumerate(self, start: int = 0) -> Dataset: ...
    def unbatch(self) -> Dataset: ...
    def cache(self, filename: str = "", name: str | None = None) -> Dataset: ...
    def padded_batch(
        self,
        batch_size: int,
        padded_shapes: Any = None,
        padding_values: Any = None,
        drop_remainder: bool = False,
        name: str | None = None,
    ) -> Dataset: ...
    def shuffle(
        self,
        buffer_size: int,
        seed: int | None = None,
        reshuffle_each_iteration: bool | None = None,
    ) -> Dataset: ...
    def batch(
        self,
        batch_size: int,
        drop_remainder: bool = False,
        num_parallel_calls: int | None = None,
        deterministic: bool | None = None,
        name: str | None = None,
    ) -> Dataset: ...
    def pack(
        self,
        sequence_length: int,
        packing: Literal["concat_then_split", "first_fit", "best_fit"] = "concat_then_split",
        num_packing_bins: int | None = None,
        key: str | int | None = None,
    ) -> Dataset: ...
    def batch_by_tokens(self, max_tokens: int, key: str | int | None = None) -> Dataset: ...
    def take(self, count: int) -> Dataset: ...
    def skip(self, count: int) -> Dataset: ...
    def repeat(self, count: int | None = None) -> Dataset: ...
    def shard(self, num_shards: int, index: int) -> Dataset: ...
    def prefetch(self, buffer_size: int) -> Dataset: ...
    def parse_example(
        self,
        features: dict[
            str,
            FixedLenFeature
            | VarLenFeature
            | FixedLenSequenceFeature
            | SparseFeature
            | RaggedFeature,
        ],
        num_parallel_calls: int | None = None,
        strings: Literal["bytes", "packed", "view"] = "bytes",
    ) -> Dataset:
        """``tf.io.parse_single_example`` on single records, ``tf.io.parse_example`` after
        ``batch``: a dict of tensors, parsed in Rust without the GIL, ``num_parallel_calls``
        elements at once (``AUTOTUNE``; ``None``: one at a time). ``strings="bytes"``
        (tf.data's form): a string tensor is an object array of ``bytes``, one Python object
        per string made on the iterating thread. ``strings="packed"``: a string tensor of
        rank 1 or more is a :class:`streamload.PackedStrings` (one ``uint8`` buffer and
        ``int64`` offsets, packed on the parsing threads, handed over without a copy);
        ``strings="view"``: a :class:`streamload.StringsView`, whose strings are read-only
        ``uint8`` arrays over the parsed records' bytes (not copied at all; made only when
        asked for). A single string stays ``bytes``."""
    def with_options(self, options: Any) -> Dataset: ...
    def distribute(
        self,
        rank: int | None = None,
        world_size: int | None = None,
        policy: str = "auto",
        remainder: str = "drop",
        rotate: int | None = None,
        weights: bool = False,
    ) -> Dataset:
        """This rank's share for data-parallel training (``rank`` and ``world_size``
        default to the ``RANK`` and ``WORLD_SIZE`` variables torchrun sets). A
        ``TFRecordDataset`` of a list of files is dealt by file (``policy="auto"`` or
        ``"file"``), a ``ParquetDataset`` by row group (``"auto"`` or ``"row_group"``);
        any other dataset of known cardinality by element (``"element"``: every rank reads
        all and keeps every ``world_size``-th). Every rank takes the same number of steps:
        ``remainder="drop"`` stops all at the smallest share, ``"pad"`` repeats elements
        of the rank's own share up to the largest (with ``weights=True`` each element is
        ``(element, weight)``, weight 0.0 for padding). ``rotate=seed`` deals the files
        in another order each epoch. Resumable like any dataset."""
    def assert_cardinality(self, expected_cardinality: int) -> Dataset:
        """``tf.data.experimental.assert_cardinality``: declares the number of elements."""
    def cardinality(self) -> int: ...
    def __iter__(self) -> Iterator: ...
    def as_numpy_iterator(self) -> Iterator: ...
    def iter_from(self, state: bytes) -> Iterator: ...

def list_files(
    file_pattern: str | PathLike[str], shuffle: bool | None = None, seed: int | None = None
) -> Dataset: ...
def read(
    format: str,
    filenames: list[str] | Dataset,
    compression_type: str | None = None,
    buffer_size: int | None = None,
    num_parallel_reads: int | None = None,
) -> Dataset: ...
def fixed_length_record_dataset(
    filenames: list[str] | Dataset,
    record_bytes: int,
    header_bytes: int | None = None,
    footer_bytes: int | None = None,
    buffer_size: int | None = None,
    compression_type: str | None = None,
    num_parallel_reads: int | None = None,
) -> Dataset: ...
def csv_dataset(
    filenames: list[str] | Dataset,
    record_defaults: list[tuple[str, Any]],
    compression_type: str | None = None,
    buffer_size: int | None = None,
    header: bool = False,
    field_delim: str = ",",
    use_quote_delim: bool = True,
    na_value: str = "",
    select_cols: list[int] | None = None,
    exclude_cols: list[int] | None = None,
    num_parallel_reads: int | None = None,
) -> Dataset: ...
def parquet_dataset(
    filenames: list[str] | Dataset,
    columns: list[str] | None = None,
    batch_size: int = 1024,
    num_parallel_reads: int | None = None,
    exclude_cols: list[str] | None = None,
    ragged: bool = False,
) -> Dataset: ...
def hdf5_dataset(
    filenames: list[str] | Dataset,
    dataset: str,
    dtype: str,
    labels: str | None = None,
    labels_dtype: str | None = None,
    slices: int | None = None,
    field: str | None = None,
    fill_missing_chunks: bool = False,
    num_parallel_reads: int | None = None,
) -> Dataset: ...
class MegatronDataset:
    def __init__(self, prefixes: list[str]) -> None: ...
    @property
    def num_documents(self) -> int: ...
    def read_document(self, number: int) -> Any: ...
    def documents(
        self,
        shuffle_seed: int | None = None,
        num_shards: int = 1,
        index: int = 0,
        num_parallel_reads: int | None = None,
    ) -> Dataset: ...

class Transform:
    """A built-in transform (``streamload.image``, ``streamload.text``): ``Dataset.map``
    runs it in Rust, without the GIL."""

    def __call__(self, element: Element) -> Element:
        """Applies the transform to one element, here (to try it out)."""

class Vocabulary:
    """``tf.lookup.StaticVocabularyTable``: tokens to ids, unknown tokens to OOV buckets."""

    def __init__(
        self,
        tokens: Iterable[str | bytes] | None = None,
        vocabulary_file: str | None = None,
        num_oov_buckets: int = 1,
        reserve_padding_id: bool = False,
    ) -> None: ...
    def size(self) -> int:
        """The number of ids: tokens, OOV buckets and the padding id."""
    def __len__(self) -> int: ...
    def lookup(self, token: bytes) -> int:
        """The id of one token."""
    def tokenize(self, key: str | int | None = None) -> Transform:
        """The transform from a text to the ids of its whitespace-separated words."""

class Tokenizer:
    """A Hugging Face ``tokenizer.json``: documents to token ids, the ``tokenizers`` package's
    ids, then ``end_token``'s; ``truncate`` cuts a document (the end id kept last),
    ``max_ids`` raises on a longer one."""

    def __init__(
        self,
        tokenizer_file: str,
        end_token: str | None = None,
        truncate: int | None = None,
        max_ids: int | None = None,
    ) -> None: ...
    def vocab_size(self) -> int:
        """How many ids the vocabulary has, its added tokens included."""
    def token_to_id(self, token: str) -> int | None:
        """The id of a token, or None."""
    def decode(self, ids: Sequence[int]) -> str:
        """The text of some ids (special tokens left out)."""
    def encode(self, key: str | int | None = None) -> Transform:
        """The transform from a text to its ids (uint32), then the end id."""

def decode(op: str, channels: int = 3, key: str | int | None = None) -> Transform: ...
def read_file(key: str | int | None = None) -> Transform: ...
def convert_image_dtype(key: str | int | None = None) -> Transform: ...
def resize(
    size: tuple[int, int], method: str = "bilinear", key: str | int | None = None
) -> Transform: ...
def image_op(
    op: str, a: float = 0.0, b: float = 0.0, seed: int | None = None, key: str | int | None = None
) -> Transform: ...
def random_resized_crop(
    size: tuple[int, int],
    scale: tuple[float, float] = (0.08, 1.0),
    ratio: tuple[float, float] = (0.75, 4 / 3),
    flip: bool = True,
    mean: list[float] | None = None,
    std: list[float] | None = None,
    layout: str = "HWC",
    dct_scaling: bool = True,
    seed: int | None = None,
    key: str | int | None = None,
) -> Transform: ...
def center_crop(
    size: tuple[int, int],
    resize_shorter: int,
    mean: list[float] | None = None,
    std: list[float] | None = None,
    layout: str = "HWC",
    key: str | int | None = None,
) -> Transform: ...
def _reference_range(
    n: int, buffer: int, seed: int, num_shards: int, index: int, batch: int, epochs: int
) -> list[list[list[int]]]: ...
def _reference_tfrecord(files: list[str], reads: int, buffer: int, seed: int) -> list[bytes]: ...

