"""with_options(tf.data.Options): a global seed, nondeterministic order, budgets."""

import time

import pytest

import streamload as sl


def test_a_global_seed_fixes_unseeded_shuffles():
    def build(seed):
        options = sl.Options()
        options.seed = seed
        return sl.Dataset.range(50).shuffle(50).with_options(options)

    first = [int(x) for x in build(5)]
    assert sorted(first) == list(range(50)) and first != list(range(50))
    assert [int(x) for x in build(5)] == first  # a fresh recipe, the same order
    assert [int(x) for x in build(6)] != first


def test_nondeterministic_order_yields_as_calls_finish_and_cannot_be_checkpointed():
    def slow_first(x):
        if x == 0:
            time.sleep(1.0)
        return x

    options = sl.Options()
    options.experimental_deterministic = False
    assert options.deterministic is False
    ds = sl.Dataset.range(8).map(slow_first, num_parallel_calls=4).with_options(options)
    it = iter(ds)
    out = [int(x) for x in it]
    assert sorted(out) == list(range(8))
    assert out[0] != 0  # the slow element did not hold the others back
    with pytest.raises(sl.CheckpointError):
        iter(ds).checkpoint()
    # The default keeps the input's order.
    assert [int(x) for x in sl.Dataset.range(8).map(slow_first, num_parallel_calls=4)] == list(range(8))


def test_budgets_and_stats_timing_are_taken():
    options = sl.Options()
    options.stats_timing = True
    options.autotune.cpu_budget = 2
    options.autotune.ram_budget = 64 << 20
    ds = sl.Dataset.range(100).map(lambda x: x, num_parallel_calls=sl.AUTOTUNE).prefetch(sl.AUTOTUNE)
    it = iter(ds.with_options(options))
    assert sum(int(x) for x in it) == sum(range(100))
    assert "map" in it.stats()
    options.autotune.cpu_budget = 0
    with pytest.raises(sl.InvalidArgumentError, match="cpu_budget"):
        ds.with_options(options)
