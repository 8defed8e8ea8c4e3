"""The 2-fold protocol of ``bench quality`` (sets without a tuning seed), by brute force.

``two_fold`` chooses every system's threshold on one half of the entities and scores
the other half; er (``er-2fold``) and the peers go through it alike, so a must-show
comparison on Leipzig rests on it. Oracle: each half's pairwise F1 counted pair by pair
in Python over the half's records alone; the threshold must be a best one of the grid.
"""

from __future__ import annotations

import importlib.util
import sys
import zlib
from itertools import combinations
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _bench_quality() -> ModuleType:
    """The script as a module; the path and the ``datasets`` module it brings in (the
    bench's, which would shadow a package of that name) are taken back out."""
    spec = importlib.util.spec_from_file_location("bench_quality", BENCH / "bench_quality.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    path = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = path
        bench_datasets = sys.modules.get("datasets")
        if Path(getattr(bench_datasets, "__file__", None) or "/").parent == BENCH:
            del sys.modules["datasets"]
    return module


BQ = _bench_quality()


def _pair_f1(gold: list[str], pred: list[str], rows: list[int]) -> float:
    tp = fp = fn = 0
    for i, j in combinations(rows, 2):
        same, match = pred[i] == pred[j], gold[i] == gold[j]
        tp, fp, fn = tp + (same and match), fp + (same and not match), fn + (match and not same)
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


@settings(max_examples=40, deadline=None)
@given(
    gold=st.lists(st.integers(0, 7), min_size=4, max_size=24),
    seed=st.integers(0, 2**16),
)
def test_each_half_is_scored_at_the_threshold_best_on_the_other(gold: list[int], seed: int) -> None:
    labels = [f"e{g}" for g in gold]
    half = [zlib.crc32(g.encode()) % 2 for g in labels]
    for k in (0, 1):  # each half holds two records of one entity, as every set does
        assume(any(labels.count(g) > 1 for g, h in zip(labels, half, strict=True) if h == k))
    rng = np.random.default_rng(seed)
    # a partition per threshold: the gold entities, some split and some merged at random
    parts = {
        float(t): [f"{g}-{rng.integers(0, 2)}" if rng.random() < 0.5 else str(g % 3) for g in gold]
        for t in BQ.GRID
    }
    out = BQ.two_fold(lambda t: parts[float(t)], labels)
    expected = full = 0.0
    for k in (0, 1):
        tune = [i for i, h in enumerate(half) if h == k]
        test = [i for i, h in enumerate(half) if h != k]
        f1 = {t: _pair_f1(labels, part, tune) for t, part in parts.items()}
        t = out[f"threshold_{k}"]  # one of the best (ties to rounding either way)
        assert f1[t] == pytest.approx(max(f1.values()), abs=1e-12)
        expected += _pair_f1(labels, parts[t], test) / 2
        full += _pair_f1(labels, parts[t], list(range(len(labels)))) / 2  # every record
    assert out["pairwise_f1"] == pytest.approx(expected, abs=1e-12)
    assert out["full_pairwise_f1"] == pytest.approx(full, abs=1e-12)
