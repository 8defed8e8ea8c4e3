"""`er status`'s throughput summary of the last done batches, on hand-made timings.

Oracle: the figures worked out by hand from the timings below.
"""

from __future__ import annotations

import datetime as dt

import pytest

from er.cli.status import _recent_line
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
    assert got["batches"] == got["timed_batches"] == 3
    assert got["span_s"] == 4 and got["mentions_per_s"] == 1500 / 4
    assert got["writer_s_per_batch"] == round((1.1 + 1.1 + 1.45) / 3, 4)
    assert got["stages_s"]["cluster_s"] == 0.4
    assert got["stages_s"]["sql_s"] == round(0.05 / 3, 4)  # absent counts 0
    assert "graph_s" in got["stages_s"] and "graph_s" not in got["writer_stages_s"]
    # busy: 2,500 mentions over 1.1 + 1.1 + 1.45 writer seconds, the idle time left out
    assert got["busy_mentions_per_s"] == float(f"{2500 / 3.65:.4g}")
    line = _recent_line("people", got)
    assert "finished 375 mentions/s over 4 s" in line and "1.22 s of writer time" in line
    assert "685 mentions/s while the writer worked" in line
    assert "most in index (0.50 s)" in line  # the overlapped graph write (0.9 s) is not


def test_one_batch_or_none_has_no_rate_and_says_so() -> None:
    assert recent_work([]) == {
        "batches": 0,
        "span_s": None,
        "mentions_per_s": None,
        "busy_mentions_per_s": None,
        "timed_batches": 0,
        "writer_s_per_batch": None,
        "stages_s": {},
        "writer_stages_s": {},
    }
    one = recent_work([(1000, PIPELINED, _at(0))])
    assert one["mentions_per_s"] is None
    line = _recent_line("people", one)
    assert "finished" not in line and line.startswith("people, last 1 done batch: ")
    assert "909 mentions/s while the writer worked" in line  # 1,000 over 1.1 s
    same_time = recent_work([(10, PIPELINED, _at(0)), (10, PIPELINED, _at(0))])
    assert same_time["mentions_per_s"] is None


def test_batches_without_timings_say_so_instead_of_failing() -> None:
    got = recent_work([(10, {}, _at(0)), (10, {}, _at(5))])
    assert got["stages_s"] == {} and got["writer_s_per_batch"] is None
    assert (
        _recent_line("old", got)
        == "old, last 2 done batches: finished 2 mentions/s over 5 s, no stage timings stored"
    )


def test_means_skip_batches_stored_without_timings() -> None:
    """After an upgrade the window mixes untimed batches; they must not count as 0 s."""
    got = recent_work([(10, {}, _at(0)), (10, {}, _at(1)), (10, PIPELINED, _at(2))])
    assert got["timed_batches"] == 1
    assert got["writer_s_per_batch"] == pytest.approx(1.1)
    assert got["stages_s"]["index_s"] == 0.5
    assert "1.10 s of writer time per batch (of the 1 with timings)" in _recent_line("p", got)


def test_a_serial_graph_write_counts_where_an_overlapped_one_does_not() -> None:
    """Each batch decides for itself whether its graph write held the writer."""
    serial = {"index_s": 0.5, "graph_s": 2.5}  # written before the next batch began
    got = recent_work([(10, serial, _at(0)), (10, PIPELINED, _at(1))])
    assert got["writer_stages_s"]["graph_s"] == 1.25  # (2.5 + 0) / 2
    assert got["writer_s_per_batch"] == pytest.approx((3.0 + 1.1) / 2)
    assert "most in graph (1.25 s)" in _recent_line("p", got)


@pytest.mark.parametrize(
    ("mentions", "seconds", "text"),
    [
        (10, 3600.0, "finished 10 mentions/h over 60 min"),
        (30, 600.0, "finished 3 mentions/min over 10 min"),
        (1, 14400.0, "finished 0.25 mentions/h over 4 h"),
        (123_456, 100.0, "finished 1,235 mentions/s over 100 s"),
    ],
)
def test_a_slow_rate_is_not_printed_as_zero(mentions: int, seconds: float, text: str) -> None:
    got = recent_work([(5, PIPELINED, _at(0)), (mentions, PIPELINED, _at(seconds))])
    assert text in _recent_line("p", got)
