"""`er cluster --neighbors auto` (the default): exact graph for small n, hnswlib above."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ER = [sys.executable, "-m", "er.cli"]


def _cluster(tmp_path: Path, X: np.ndarray, name: str, *extra: str) -> dict:
    np.save(tmp_path / "X.npy", X)
    out = tmp_path / f"{name}.json"
    cmd = [*ER, "cluster", "--algorithm", "scc", "--input", str(tmp_path / "X.npy"), *extra]
    done = subprocess.run([*cmd, "--output", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def _mixture(n: int, clusters: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, clusters, n)
    X = rng.normal(size=(clusters, 8))[y] * 5 + rng.normal(size=(n, 8)) * 0.3
    return X.astype(np.float32), y


def test_auto_is_the_default_and_equals_exact_below_the_threshold(tmp_path: Path) -> None:
    X, _ = _mixture(300, 6, 0)
    default = _cluster(tmp_path, X, "default")
    exact = _cluster(tmp_path, X, "exact", "--neighbors", "exact")
    assert default == exact


def test_auto_above_the_threshold_uses_the_index(tmp_path: Path) -> None:
    X, y = _mixture(6000, 30, 1)
    np.save(tmp_path / "y.npy", y)
    _cluster(tmp_path, X, "auto", "--neighbors", "auto")
    cmd = [*ER, "score", "--structure", str(tmp_path / "auto.json"), "--labels"]
    scored = subprocess.run([*cmd, str(tmp_path / "y.npy")], capture_output=True, text=True)
    assert json.loads(scored.stdout)["dendrogram_purity"] == 1.0
