"""The PyTorch adapter (streamload.torch): tensors sharing the Rust buffers (DLPack),
DataLoader with batch_size=None and workers, resume through state_dict, torchdata's
StatefulDataLoader. Runs where torch is installed (.ci/run installs it)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import streamload as sl  # noqa: E402
from streamload.torch import IterableDataset, to_torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402


def pipeline(n=100, batch=8):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    return (
        sl.Dataset.from_tensor_slices({"x": x, "y": np.arange(n), "name": np.array([b"r%d" % i for i in range(n)], dtype=object)})
        .shuffle(32, seed=1)
        .batch(batch)
        .prefetch(2)
    )


def test_batches_are_tensors_sharing_the_rust_buffers():
    adapter = IterableDataset(pipeline())
    it = iter(adapter)
    batch = next(it)
    assert isinstance(batch["x"], torch.Tensor) and batch["x"].dtype == torch.float32
    assert batch["y"].dtype == torch.int64 and batch["x"].shape == (8, 3)
    # No copy: the tensors' data are the buffers Rust filled (depth first, keys in order:
    # name has no buffer, then x, then y).
    assert [batch["x"].data_ptr(), batch["y"].data_ptr()] == adapter._iterator._last_buffer_addresses()
    assert batch["name"].dtype == object  # strings stay numpy object arrays
    # torch.from_dlpack on the numpy arrays themselves shares them too.
    (raw,) = list(pipeline(8, 8))
    assert torch.from_dlpack(raw["x"]).data_ptr() == raw["x"].ctypes.data


def test_dataloader_with_batch_size_none_gives_the_pipelines_batches():
    want = list(pipeline())
    got = list(DataLoader(IterableDataset(pipeline()), batch_size=None))
    assert len(got) == len(want) == 13
    for g, w in zip(got, want):
        assert torch.equal(g["x"], torch.from_numpy(w["x"]))
        assert g["y"].tolist() == w["y"].tolist()


def test_workers_each_read_their_share():
    loader = DataLoader(IterableDataset(pipeline()), batch_size=None, num_workers=2)
    ys = sorted(y for b in loader for y in b["y"].tolist())
    assert ys == list(range(100))


def test_state_dict_resumes_in_a_new_adapter():
    whole = [b["y"].tolist() for b in IterableDataset(pipeline())]
    adapter = IterableDataset(pipeline())
    loader = DataLoader(adapter, batch_size=None)
    seen = []
    for batch in loader:
        seen.append(batch["y"].tolist())
        if len(seen) == 5:
            break
    state = adapter.state_dict()
    assert isinstance(state["streamload"], bytes)
    fresh = IterableDataset(pipeline())  # as after a restart
    fresh.load_state_dict(state)
    rest = [b["y"].tolist() for b in DataLoader(fresh, batch_size=None)]
    assert seen + rest == whole
    # The next iteration after that is a fresh epoch.
    assert len(list(fresh)) == 13


def test_torchdatas_stateful_dataloader():
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    whole = [b["y"].tolist() for b in IterableDataset(pipeline())]
    loader = stateful.StatefulDataLoader(IterableDataset(pipeline()), batch_size=None)
    it = iter(loader)
    seen = [next(it)["y"].tolist() for _ in range(4)]
    state = loader.state_dict()
    again = stateful.StatefulDataLoader(IterableDataset(pipeline()), batch_size=None)
    again.load_state_dict(state)
    rest = [b["y"].tolist() for b in again]
    assert seen + rest == whole


def test_to_torch_structures_scalars_and_sparse():
    element = (np.int64(3), b"s", [np.zeros(2, np.float32)])
    out = to_torch(element)
    assert out[0].item() == 3 and out[0].dim() == 0 and out[1] == b"s"
    assert isinstance(out[2][0], torch.Tensor)
    sparse = sl.SparseTensorValue(
        np.array([[0, 1], [2, 0]], np.int64), np.array([5, 7], np.int64), np.array([3, 2], np.int64)
    )
    dense = to_torch(sparse).to_dense()
    assert dense.tolist() == sparse.to_dense().tolist() == [[0, 5], [0, 0], [7, 0]]
    with pytest.raises(TypeError):
        IterableDataset([1, 2, 3])


def test_the_training_example_resumes_exactly_after_a_kill(tmp_path):
    import subprocess
    import sys

    from conftest import REPO

    script = REPO / "python" / "examples" / "train_torch.py"

    def run(log, checkpoint, *extra):
        return subprocess.run(
            [sys.executable, str(script), "--data", str(tmp_path / "data"), "--steps", "60",
             "--save-every", "10", "--checkpoint", str(checkpoint), "--log", str(log), *extra],
            capture_output=True, text=True, timeout=300,
        )

    whole = run(tmp_path / "whole.log", tmp_path / "whole.pt")
    assert whole.returncode == 0, whole.stderr
    killed = run(tmp_path / "killed.log", tmp_path / "killed.pt", "--kill-at", "35")
    assert killed.returncode == 137 and "killed at step 35" in killed.stdout
    resumed = run(tmp_path / "killed.log", tmp_path / "killed.pt")
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed at step 30" in resumed.stdout

    def by_step(path):
        steps = {}
        for line in path.read_text().split("\n"):
            if line:
                step, label_sum = line.split()
                steps.setdefault(int(step), []).append(label_sum)
        return steps

    want, got = by_step(tmp_path / "whole.log"), by_step(tmp_path / "killed.log")
    assert sorted(want) == sorted(got) == list(range(1, 61))
    # Steps 31..35 ran twice (before the kill, and again from the step-30 save): the same
    # batches both times, and every step the batch of the uninterrupted run.
    assert all(len(got[s]) == 2 for s in range(31, 36))
    assert all(set(got[s]) == set(want[s]) and len(set(got[s])) == 1 for s in want)
    assert whole.stdout.splitlines()[-1] == resumed.stdout.splitlines()[-1]
