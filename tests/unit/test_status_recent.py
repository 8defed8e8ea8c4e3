"""`er status`'s throughput summary of the last done batches, on hand-made timings.

Oracle: the figures worked out by hand from the timings below.
"""

from __future__ import annotations

import datetime as dt

import pytest

from er.cli import _recent_line
from er.pipeline import recent_work, writer_seconds

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)


def _at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


PIPELINED = {
    "featurize_s": 0.1,
    "index_s": 0.5,
    "cluster_s": 0.3,
    "graph_s": 0.9,
    "graph_wait_s": 0.2,
}


def test_a_graph_write_beside_the_next_batch_costs_the_writer_only_its_wait() -> None:
    assert writer_seconds(PIPELINED) == pytest.approx(0.1 + 0.5 + 0.3 + 0.2)
    serial = {k: v for k, v in PIPELINED.items() if k != "graph_wait_s"}
    assert writer_seconds(serial) == pytest.approx(0.1 + 0.5 + 0.3 + 0.9)


def test_rate_counts_the_batches_finished_after_the_first() -> None:
    batches = [
        (1000, PIPELINED, _at(0)),
        (1000, PIPELINED, _at(2)),
        (500, {**PIPELINED, "cluster_s": 0.6, "sql_s": 0.05}, _at(4)),
    ]
    got = recent_work(batches)
    assert got["batches"] == 3
    assert got["mentions_per_s"] == 1500 / 4
    assert got["writer_s_per_batch"] == round((1.1 + 1.1 + 1.45) / 3, 4)
    assert got["stages_s"]["cluster_s"] == 0.4
    assert got["stages_s"]["sql_s"] == round(0.05 / 3, 4)  # absent counts 0
    line = _recent_line("people", got)
    assert "375 mentions/s" in line and "1.22 s of writer time" in line
    assert "most in index (0.50 s)" in line  # the overlapped graph write (0.9 s) is not


def test_one_batch_or_none_has_no_rate_and_says_so() -> None:
    assert recent_work([]) == {
        "batches": 0,
        "mentions_per_s": None,
        "writer_s_per_batch": None,
        "stages_s": {},
    }
    one = recent_work([(1000, PIPELINED, _at(0))])
    assert one["mentions_per_s"] is None
    assert "mentions/s" not in _recent_line("people", one)
    same_time = recent_work([(10, PIPELINED, _at(0)), (10, PIPELINED, _at(0))])
    assert same_time["mentions_per_s"] is None


def test_batches_without_timings_say_so_instead_of_failing() -> None:
    got = recent_work([(10, {}, _at(0)), (10, {}, _at(5))])
    assert got["stages_s"] == {} and got["writer_s_per_batch"] == 0.0
    assert (
        _recent_line("old", got)
        == "old, last 2 done batches: 2 mentions/s, no stage timings stored"
    )
