"""Bad input to the CLI: one clear line naming the input, exit code 2, no traceback.

Each case was seen on the previous main as a traceback, a silent change, or exit 0
with an empty result (issue "make what landed true", item 6).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ER = [sys.executable, "-m", "er.cli"]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ER, *args], capture_output=True, text=True, timeout=300, env=env)


def _one_clear_line(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.fixture
def good(tmp_path: Path) -> Path:
    X = np.random.default_rng(0).normal(size=(20, 4)).astype(np.float32)
    np.save(tmp_path / "X.npy", X)
    return tmp_path / "X.npy"


def _cluster(inp: Path, out: Path, *extra: str, algorithm: str = "scc"):  # type: ignore[no-untyped-def]
    return _run(
        "cluster", "--algorithm", algorithm, "--input", str(inp), "--output", str(out), *extra
    )


def test_missing_and_empty_and_object_files(tmp_path: Path) -> None:
    out = tmp_path / "S.json"
    _one_clear_line(_cluster(tmp_path / "nope.npy", out), "nope.npy", "no such file")
    (tmp_path / "empty.npy").write_bytes(b"")
    _one_clear_line(_cluster(tmp_path / "empty.npy", out), "empty.npy", "not a readable")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    _one_clear_line(_cluster(tmp_path / "obj.npy", out), "obj.npy", "not a readable")
    np.save(tmp_path / "none.npy", np.zeros((0, 4), np.float32))
    _one_clear_line(_cluster(tmp_path / "none.npy", out), "none.npy", "no points")
    assert not out.exists()


def test_zero_rows_are_named(tmp_path: Path) -> None:
    X = np.ones((5, 3), np.float32)
    X[3] = 0
    np.save(tmp_path / "z.npy", X)
    _one_clear_line(_cluster(tmp_path / "z.npy", tmp_path / "S.json"), "z.npy", "row 3")


def test_missing_output_folder_is_refused_before_the_fit(good: Path, tmp_path: Path) -> None:
    done = _cluster(good, tmp_path / "no" / "S.json")
    _one_clear_line(done, "does not exist")


def test_options_that_would_be_ignored(good: Path, tmp_path: Path) -> None:
    out = tmp_path / "S.json"
    _one_clear_line(_cluster(good, out, "--neighbors", "annoy", algorithm="grinch"), "annoy")
    _one_clear_line(_cluster(good, out, "--batch-size", "5", algorithm="scc"), "--batch-size")


def test_score_with_wrong_labels(good: Path, tmp_path: Path) -> None:
    out = tmp_path / "S.json"
    assert _cluster(good, out).returncode == 0
    np.save(tmp_path / "y.npy", np.zeros(7, np.int64))
    done = _run("score", "--structure", str(out), "--labels", str(tmp_path / "y.npy"))
    _one_clear_line(done, "y.npy", "(20,)")
    done = _run("score", "--structure", str(tmp_path / "x.json"), "--labels", str(out))
    _one_clear_line(done, "x.json", "no such file")


def test_unreachable_stores(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ER_")}
    env["ER_DATA_DIR"] = str(tmp_path)
    graph_env = {**env, "ER_GRAPH_URL": "falkordb://127.0.0.1:1"}
    _one_clear_line(
        _run("query", "stats", "--collection", "c", env=graph_env),
        "cannot reach FalkorDB at 127.0.0.1:1",
        "ER_GRAPH_URL",
    )
    db_env = {**env, "ER_DATABASE_URL": "postgresql+psycopg://nobody@127.0.0.1:1/none"}
    _one_clear_line(_run("init", env=db_env), "cannot reach the database", "ER_DATABASE_URL")


@pytest.mark.parametrize(
    "args",
    [
        ("model", "--collection", "c"),
        ("status",),
        ("export", "entities", "--collection", "c"),
        ("eval", "--collection", "c"),
        ("retry", "--collection", "c"),
        ("rejects", "--collection", "c"),
    ],
)
def test_a_read_before_any_ingest_says_there_are_no_tables(tmp_path: Path, args) -> None:  # type: ignore[no-untyped-def]
    """A fresh data folder: its SQLite file has no er tables (`er model` printed a
    traceback, the others "database unavailable")."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ER_")}
    env["ER_DATA_DIR"] = str(tmp_path)
    _one_clear_line(_run(*args, env=env), "no er tables yet", "er ingest")
