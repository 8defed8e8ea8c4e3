"""The chaos run (issue #54), small: records through Redis, an `er worker` and its
embedded graph, with SIGKILLs of the worker and of the graph server at seeded moments
and the last batch's step failed, then retried with `er retry`; everything ends equal
to a run without faults (bench/chaos.py, which `python -m bench chaos` runs at 100k).

Oracle: the run without faults, on the same records and batch boundaries (equal
exports, graph as of every batch, SQL rows), and the records themselves (each accepted
one in exactly one entity).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from ._procs import own_redis_db

pytestmark = [pytest.mark.celery, pytest.mark.postgres, pytest.mark.graph, pytest.mark.slow]

BENCH = Path(__file__).resolve().parents[2] / "bench"
N, BATCH, KILLS, SEED = 2000, 100, 10, 54


def test_kills_and_a_retried_failure_end_as_a_run_without_faults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    from chaos import chaos_run
    from people import synthetic_people

    log = logging.getLogger("chaos")
    out = chaos_run(
        synthetic_people(N, seed=SEED),
        batch=BATCH,
        kills=KILLS,
        seed=SEED,
        redis_db=own_redis_db(),
        logs=tmp_path / "logs",
        say=log.warning,
    )
    events = out["b"]["events"]
    assert events["worker_kills"] == KILLS and events["graph_kills"] == KILLS, events
    assert events["retries"] == 1 and "graph_kills_skipped" not in events, events
    assert out["differences"] == [], out["differences"]
    once = out["b"]["snapshot"]["once"]
    assert once == {**once, "accepted": N} and all(once.values()), once
    assert [b[:2] for b in out["b"]["snapshot"]["batches"]] == [
        [s, "done"] for s in range(1, N // BATCH + 1)
    ]
    sys.modules.pop("chaos", None)
    sys.modules.pop("people", None)
