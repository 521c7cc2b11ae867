"""Dataset.distribute: each rank's share for data-parallel training (by file for TFRecord
files, by row group for Parquet, by element otherwise), every rank the same number of steps."""

import shutil

import numpy as np
import pytest

import streamload as sl
from conftest import REPO_DATA, TF_DATA


def test_by_element_with_padding_and_weights():
    ds = sl.Dataset.range(10)
    ranks = [list(ds.distribute(r, 4, remainder="pad", weights=True)) for r in range(4)]
    assert [(int(x), float(w)) for x, w in ranks[3]] == [(3, 1.0), (7, 1.0), (3, 0.0)]
    assert all(len(r) == 3 for r in ranks)
    real = sorted(int(x) for r in ranks for x, w in r if w == 1.0)
    assert real == list(range(10))
    dropped = [list(map(int, ds.distribute(r, 4))) for r in range(4)]
    assert dropped == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_tfrecord_files_are_dealt_to_ranks(tmp_path):
    files = []
    for i in range(4):
        path = tmp_path / f"part-{i}.tfrecord"
        shutil.copy(TF_DATA / "plain.tfrecord", path)
        files.append(str(path))
    records = list(sl.TFRecordDataset(files[0]))
    shares = [list(sl.TFRecordDataset(files).distribute(r, 2, policy="file")) for r in range(2)]
    assert [len(s) for s in shares] == [200, 200]
    assert shares[0] == records * 2 and shares[1] == records * 2
    # The plan is TFRecord's own (by file), not every rank reading everything.
    auto = list(sl.TFRecordDataset(files).distribute(1, 2))
    assert len(auto) == 200
    # Rotation deals other files each epoch, the same number of steps.
    rotated = sl.TFRecordDataset(files).distribute(0, 2, policy="file", rotate=3)
    assert len(list(rotated)) == 200
    with pytest.raises(sl.InvalidArgumentError, match="files"):
        sl.TFRecordDataset(files[:1]).distribute(0, 2, policy="file")


def test_parquet_row_groups_and_resume():
    path = str(REPO_DATA / "parquet" / "types-none.parquet")
    ds = sl.ParquetDataset([path, path], columns=["id"], batch_size=100)
    shares = [ds.distribute(r, 2, policy="row_group") for r in range(2)]
    ids = [np.concatenate([b["id"] for b in s]) for s in shares]
    assert len(ids[0]) == len(ids[1]) == 1000
    assert sorted(np.concatenate(ids).tolist()) == sorted(list(range(1000)) * 2)
    it = iter(shares[1])
    first = [next(it)["id"] for _ in range(3)]
    state = it.checkpoint()
    rest = [b["id"] for b in shares[1].iter_from(state)]
    assert np.concatenate(first + rest).tolist() == ids[1].tolist()


def test_rank_from_the_environment_and_bad_arguments(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert list(map(int, sl.Dataset.range(6).distribute())) == [1, 3, 5]
    with pytest.raises(sl.InvalidArgumentError, match="below"):
        sl.Dataset.range(6).distribute(2, 2)
    with pytest.raises(sl.InvalidArgumentError, match="policy"):
        sl.Dataset.range(6).distribute(0, 2, policy="bogus")
    unknown = sl.Dataset.range(6).filter(lambda x: x > 2)
    with pytest.raises(sl.InvalidArgumentError, match="assert_cardinality"):
        unknown.distribute(0, 2)
    assert list(map(int, unknown.assert_cardinality(3).distribute(0, 2))) == [3]
