"""A collection split across writer processes (``bench/bench_parts.py``, docs/sharding.md):
after every batch the parts' entities are one writer's, and over the whole run each
entity id of the parts names one id of the one writer, across every component's move.

Oracle: the MBSCC core stepped directly on each batch's whole candidate lists, as the
pipeline's writer steps it (no parts, no stand-ins, no moves), its hierarchy cut whole
at the collection's cut and matched by one ledger over every mention.
"""

from __future__ import annotations

import importlib.util
import sys
from argparse import Namespace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from er.entities import ArrayLedger
from er.evaluation import cut_at_score
from er.pipeline.config import _make_core

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _bench_parts(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The script as a module, registered (its dataclasses look it up), with ``bench/``
    on ``sys.path`` for the test (it imports its neighbours when called, too); both
    undone after the test."""
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_parts", BENCH / "bench_parts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_parts", module)
    spec.loader.exec_module(module)
    return module


def _one_writer(
    bp: ModuleType, args: Namespace, records: list[dict[str, str]], model: Any
) -> list[NDArray[np.int64]]:
    """(n,) every mention's entity id after each batch, by the core stepped directly."""
    config = bp.collection_config(args, records)
    core = _make_core(config["algorithm"], dict(config["params"]))
    stream = bp.Stream(config, model, int(core.k))
    table, ledger, out = stream.table, ArrayLedger(), []  # the table grows in place

    def against(left: NDArray[np.int64], right: NDArray[np.int64]) -> NDArray[np.float64]:
        return model.against(table, left, right)  # type: ignore[no-any-return]

    for t, start in enumerate(range(0, len(records), args.batch)):
        _, idx, sim = stream.batch(records[start : start + args.batch])
        core.partial_fit(
            np.zeros((idx.shape[0], 1), np.float32),
            neighbors=(idx, np.where(idx >= 0, sim, 0).astype(np.float32)),
            pair_scores=against,
        )
        n = start + idx.shape[0]
        label = cut_at_score(core.hierarchy_, float(config["cut_threshold"]))
        ledger.step_labels(t + 1, np.arange(n), label[:n])
        entity = np.full(n, -1, np.int64)
        entity[ledger.mention_] = ledger.entity_
        out.append(entity)
    return out


# sparse records tie often (equal scores); the collection's default tie break (by the
# pair, er.pipeline.scores) orders them alike in every part, where the cores' point
# order, which a move changes, did not
@pytest.mark.parametrize("people", ["people", "real-sparse"])
def test_parts_resolve_as_one_writer_with_the_same_ids(
    people: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    bp = _bench_parts(monkeypatch)
    args = Namespace(n=4000, batch=250, train=1500, people=people, seed=3, point_ties=False)
    records = bp.people_records(people, args.n, seed=args.seed)
    model = bp.trained_model(bp.collection_config(args, records), records[: args.train])
    reference = _one_writer(bp, args, records, model)
    for n_parts in (2, 3):
        out = bp.run(args, records, n_parts, bp.Check(reference), model)
        # the paths this test is for were taken: components moved, stand-ins carried
        assert out["moves"] > 0 and out["carriers"] > 0
        if people != "people":  # the project's people move one mention at a time
            assert out["moved_mentions"] > out["moves"]
        assert out["floor_pairs_off_part"] == 0
        assert out["batches_partition_differs"] == 0
        assert out["id_conflicts"] == 0
        assert out["ids_matched"] == len(np.unique(np.concatenate(reference)))
