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
