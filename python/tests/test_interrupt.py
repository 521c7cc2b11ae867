"""Ctrl-C stops a waiting loop promptly; dropping an iterator stops its epoch's work."""

import gc
import os
import signal
import threading
import time

import pytest

import streamload as sl


def slow_elements(stop, made):
    """A generator whose elements take long (in short sleeps, so it can be stopped)."""

    def gen():
        i = 0
        while not stop.is_set():
            made.append(i)
            yield i
            i += 1
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not stop.is_set():
                time.sleep(0.01)

    return gen


def test_ctrl_c_interrupts_a_loop_waiting_for_an_element():
    stop, made = threading.Event(), []
    ds = sl.Dataset.from_generator(slow_elements(stop, made)).prefetch(1)
    it = iter(ds)
    assert next(it) == 0  # the next element takes 30 s
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            next(it)
        waited = time.monotonic() - started
        assert waited < 5, f"KeyboardInterrupt came after {waited:.1f} s"
    finally:
        timer.cancel()
        del it
        stop.set()


def test_ctrl_c_interrupts_a_slow_parallel_map():
    stop = threading.Event()

    def slow(x):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not stop.is_set():
            time.sleep(0.01)
        return x

    it = iter(sl.Dataset.range(10).map(slow, num_parallel_calls=2))
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            next(it)
        assert time.monotonic() - started < 5
    finally:
        timer.cancel()
        stop.set()
        del it


def test_dropping_an_iterator_stops_its_work():
    stop, made = threading.Event(), []

    def fast():
        i = 0
        while not stop.is_set():
            made.append(i)
            yield i
            i += 1
            time.sleep(0.001)

    ds = sl.Dataset.from_generator(fast).prefetch(4)
    it = iter(ds)
    assert [int(next(it)) for _ in range(5)] == [0, 1, 2, 3, 4]
    del it
    gc.collect()
    time.sleep(0.5)  # let the aborted tasks wind down
    count = len(made)
    time.sleep(0.5)
    try:
        assert len(made) == count, "the generator kept running after the iterator was dropped"
        # Bounded: it made at most what the buffers hold ahead of the consumer.
        assert count < 5 + 20
    finally:
        stop.set()


def test_close_stops_the_epoch():
    it = iter(sl.Dataset.range(1_000_000).prefetch(8))
    assert next(it) == 0
    it.close()
    assert list(it) == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
def test_a_forked_child_runs_epochs_of_its_own():
    # As a PyTorch DataLoader worker: the parent has run epochs (its runtime's threads exist
    # in the parent only); the child makes its own iterator and must not hang.
    ds = sl.Dataset.range(100).map(lambda x: x * 2, num_parallel_calls=2).batch(10).prefetch(2)
    assert sum(int(b.sum()) for b in ds) == 2 * sum(range(100))
    pid = os.fork()
    if pid == 0:  # the child: exit at once, whatever happens, without pytest's teardown
        code = 1
        try:
            ok = sum(int(b.sum()) for b in ds) == 2 * sum(range(100))
            code = 0 if ok else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung running an epoch")
