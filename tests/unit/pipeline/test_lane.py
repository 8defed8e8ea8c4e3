"""The writer's wait for a background graph write (er.pipeline.lane._written)."""

from __future__ import annotations

import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest


class _Interrupted(Exception):
    """Stands in for a task's soft time limit, raised in the waiting thread."""


def test_an_error_raised_while_waiting_lets_the_write_end_first() -> None:
    """A signal handler raises in the main thread while it waits for the write: the
    error propagates, but only after the write ended, so the caller decides the batch's
    fate knowing whether the graph holds it."""
    from er.pipeline.lane import _written

    finished = threading.Event()

    def write() -> float:
        time.sleep(0.5)
        finished.set()
        return 0.5

    def interrupt(signum: int, frame: object) -> None:
        raise _Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            future = pool.submit(write)
            signal.setitimer(signal.ITIMER_REAL, 0.1)
            with pytest.raises(_Interrupted):
                _written(future)
            assert finished.is_set() and future.done()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_the_write_s_own_error_is_the_one_raised() -> None:
    from er.pipeline.lane import _written

    def write() -> float:
        raise ValueError("the graph refused it")

    with ThreadPoolExecutor(max_workers=1) as pool, pytest.raises(ValueError, match="refused"):
        _written(pool.submit(write))
