"""PyTorch adapters: a streamload :class:`~streamload.Dataset` as a
``torch.utils.data.IterableDataset``, elements as torch tensors that share the Rust
buffers (no copy), and resume through torch's ``state_dict`` protocol.

::

    import streamload as sl
    from streamload.torch import IterableDataset
    from torch.utils.data import DataLoader

    ds = (sl.TFRecordDataset(files, num_parallel_reads=4)
            .shuffle(10_000, seed=7).batch(256)
            .parse_example(spec).prefetch(2))
    loader = DataLoader(IterableDataset(ds), batch_size=None)   # streamload batches
    for batch in loader:            # {"image": torch.Tensor, "label": torch.Tensor}
        ...
    state = loader.dataset.state_dict()          # {"streamload": bytes}; save it
    loader.dataset.load_state_dict(state)        # the next iteration goes on from there

streamload does the parallel work itself (reading, parsing, decoding, shuffling, batching
on its own threads, without the GIL), so ``num_workers=0`` (the default) is the fast setting:
there is no process to pickle batches through. With ``num_workers=n`` each worker process
runs the pipeline on every ``n``-th element (``shard(n, worker_id)``).

torchdata's ``StatefulDataLoader`` takes the same ``state_dict``/``load_state_dict``
(``num_workers=0``): the loader's ``state_dict()`` holds the dataset's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.utils.data

from ._native import Dataset
from .sparse import SparseTensorValue


def to_torch(element: Any) -> Any:
    """An element as torch tensors: each numeric numpy array becomes a tensor sharing its
    buffer (``torch.from_dlpack``: the Rust buffer, no copy), numpy scalars 0-d tensors,
    a numeric ``SparseTensorValue`` a sparse COO tensor; strings (``bytes``, object
    arrays) stay as they are (torch has no string tensors); tuples, lists and dicts keep
    their structure."""
    if isinstance(element, np.ndarray):
        if element.dtype == object:
            return element
        return torch.from_dlpack(element)
    if isinstance(element, np.generic):
        if isinstance(element, np.bytes_):
            return bytes(element)
        return torch.from_numpy(np.asarray(element))
    if isinstance(element, SparseTensorValue):
        if element.values.dtype == object:
            return element
        return torch.sparse_coo_tensor(
            torch.from_numpy(np.ascontiguousarray(element.indices.T)),
            torch.from_dlpack(element.values),
            tuple(int(d) for d in element.dense_shape),
            check_invariants=True,
        )
    if isinstance(element, dict):
        return {k: to_torch(v) for k, v in element.items()}
    if isinstance(element, tuple):
        return tuple(to_torch(v) for v in element)
    if isinstance(element, list):
        return [to_torch(v) for v in element]
    return element


class IterableDataset(torch.utils.data.IterableDataset):
    """A streamload ``Dataset`` as a ``torch.utils.data.IterableDataset``: each ``iter()``
    is a fresh epoch of it (or goes on from the state loaded with :meth:`load_state_dict`),
    its elements converted with :func:`to_torch` (``to_torch=False`` keeps numpy).

    Use it with ``DataLoader(..., batch_size=None)`` when the dataset batches (it should:
    batching in streamload is one copy per batch in Rust, not a collate in Python), or
    directly (``for batch in IterableDataset(ds)``).

    ``state_dict()`` is the position after the last element handed out, as
    ``{"streamload": bytes}`` (``Iterator.checkpoint()``); ``load_state_dict(state)`` makes
    the next ``iter()`` go on from there, in this process or another (the dataset must be
    built the same way). A state taken in a ``DataLoader`` worker is that worker's own.
    """

    def __init__(self, dataset: Dataset, to_torch: bool = True):
        super().__init__()
        if not isinstance(dataset, Dataset):
            raise TypeError(f"IterableDataset wraps a streamload Dataset, not {type(dataset)}")
        self.dataset = dataset
        self.to_torch = to_torch
        self._iterator = None
        self._resume: "bytes | None" = None

    def _pipeline(self) -> Dataset:
        info = torch.utils.data.get_worker_info()
        if info is None or info.num_workers <= 1:
            return self.dataset
        return self.dataset.shard(info.num_workers, info.id)

    def __iter__(self):
        pipeline = self._pipeline()
        if self._resume is not None:
            iterator = pipeline.iter_from(self._resume)
            self._resume = None
        else:
            iterator = iter(pipeline)
        self._iterator = iterator
        convert = to_torch if self.to_torch else (lambda e: e)
        # The epoch stays open after a loop left early, for state_dict(); the next iter()
        # or load_state_dict() drops it (and stops its tasks).
        for element in iterator:
            yield convert(element)

    def state_dict(self) -> dict:
        """``{"streamload": bytes}``: where the current epoch is (after the last element
        handed out); before any iteration, the state loaded (or the start)."""
        if self._iterator is None:
            return {"streamload": self._resume}
        return {"streamload": self._iterator.checkpoint()}

    def load_state_dict(self, state_dict: dict) -> None:
        """The next ``iter()`` goes on from ``state_dict`` (from :meth:`state_dict`);
        ``{"streamload": None}`` starts a fresh epoch."""
        self._resume = state_dict.get("streamload")
        self._iterator = None

    def __len__(self) -> int:
        n = self.dataset.cardinality()
        if n < 0:
            raise TypeError("the dataset's length is not known (cardinality() is < 0)")
        return n


__all__ = ["IterableDataset", "to_torch"]
