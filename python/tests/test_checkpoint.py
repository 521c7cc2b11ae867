"""Checkpoint and resume from Python: an epoch interrupted, saved as bytes and resumed (from
a dataset built again the same way) gives exactly the elements of the uninterrupted epoch."""

import pytest

import streamload as sl
from conftest import TF_DATA


def plain(element):
    if isinstance(element, dict):
        return {k: plain(v) for k, v in element.items()}
    return element.tolist() if hasattr(element, "tolist") else element


RECIPES = {
    "range shuffle map batch prefetch": lambda: sl.Dataset.range(500)
    .shuffle(64, seed=3)
    .map(lambda x: x * 2)
    .batch(16)
    .prefetch(2),
    "parallel map, filter, repeat": lambda: sl.Dataset.range(100)
    .map(lambda x: x + 1, num_parallel_calls=3)
    .filter(lambda x: x % 3 != 0)
    .repeat(2)
    .batch(7),
    "tfrecord files, shuffle, parse, batch": lambda: sl.TFRecordDataset(
        [str(TF_DATA / "examples.tfrecord")] * 3, num_parallel_reads=2
    )
    .shuffle(25, seed=9)
    .batch(4)
    .parse_example({"id": sl.FixedLenFeature([], sl.int64)})
    .prefetch(sl.AUTOTUNE),
    "from_tensor_slices, skip, take, shard": lambda: sl.Dataset.from_tensor_slices(
        {"x": list(range(60))}
    )
    .skip(5)
    .take(50)
    .shard(2, 1),
}


@pytest.mark.parametrize("name", sorted(RECIPES))
@pytest.mark.parametrize("stop_after", [0, 1, 5])
def test_resume_equals_the_uninterrupted_epoch(name, stop_after):
    build = RECIPES[name]
    uninterrupted = [plain(e) for e in build()]
    it = iter(build())
    seen = [plain(next(it)) for _ in range(min(stop_after, len(uninterrupted)))]
    state = it.checkpoint()
    assert isinstance(state, bytes)
    del it
    seen += [plain(e) for e in build().iter_from(state)]
    assert seen == uninterrupted


def test_an_ended_epoch_resumes_as_ended():
    ds = sl.Dataset.range(3)
    it = iter(ds)
    assert len(list(it)) == 3
    assert list(ds.iter_from(it.checkpoint())) == []


def test_a_checkpoint_of_another_recipe_is_refused():
    it = iter(sl.Dataset.range(10).batch(2))
    next(it)
    with pytest.raises(sl.CheckpointError, match="another recipe"):
        sl.Dataset.range(10).batch(3).iter_from(it.checkpoint())
    with pytest.raises(sl.Error):
        sl.Dataset.range(10).iter_from(b"not a checkpoint")


def test_a_generator_cannot_be_checkpointed_and_says_so():
    it = iter(sl.Dataset.from_generator(lambda: iter(range(5))))
    next(it)
    with pytest.raises(sl.CheckpointError, match="from_generator"):
        it.checkpoint()


def test_stats_report_names_the_stages():
    it = iter(sl.Dataset.range(100).map(lambda x: x).batch(10))
    list(it)
    report = it.stats()
    assert "range" in report and "batch" in report
