"""The README's main job, `er demo`, on embedded defaults (SQLite + embedded FalkorDB)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.graph


def _er(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ER_")}
    env["ER_DATA_DIR"] = str(data_dir)
    return subprocess.run(
        [sys.executable, "-m", "er.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_demo_then_query_on_embedded_defaults(tmp_path: Path) -> None:
    done = _er(tmp_path, "demo", "--entities", "40")
    assert done.returncode == 0, done.stderr
    assert "dendrogram_purity" in done.stderr and "Try: er query" in done.stderr
    assert (tmp_path / "er.sqlite3").exists() and (tmp_path / "falkordb").is_dir()
    stats = json.loads(_er(tmp_path, "query", "stats", "--collection", "demo").stdout)
    assert stats["nodes"] > 40 and stats["current_edges"] == stats["nodes"] - 1  # one tree
    again = _er(tmp_path, "demo", "--entities", "40")  # same seed: replay changes nothing
    assert again.returncode == 0, again.stderr
    assert json.loads(_er(tmp_path, "query", "stats", "--collection", "demo").stdout) == stats
    members = json.loads(
        _er(
            tmp_path, "query", "members", "--collection", "demo", "--id", str(stats["nodes"] - 1)
        ).stdout
    )
    assert len(members) > 40  # the root holds every mention


def test_demo_with_other_input_is_refused_not_merged(tmp_path: Path) -> None:
    assert _er(tmp_path, "demo", "--entities", "30").returncode == 0
    stats = json.loads(_er(tmp_path, "query", "stats", "--collection", "demo").stdout)
    other = _er(tmp_path, "demo", "--entities", "30", "--seed", "1")
    assert other.returncode == 2
    assert "batch 1 of collection 'demo' was already resolved from other input" in other.stderr
    assert "Traceback" not in other.stderr
    # before the fix the second hierarchy was merged into batch 1
    assert json.loads(_er(tmp_path, "query", "stats", "--collection", "demo").stdout) == stats


def test_demo_without_entities_is_refused(tmp_path: Path) -> None:
    done = _er(tmp_path, "demo", "--entities", "0")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("--entities must be at least 1. Got 0.")


def test_query_by_external_id(tmp_path: Path) -> None:
    import sqlite3

    assert _er(tmp_path, "demo", "--entities", "25").returncode == 0
    with sqlite3.connect(tmp_path / "er.sqlite3") as db:
        rows = db.execute("SELECT external_id, node_id FROM mentions").fetchall()
    assert rows and all(node is not None for _, node in rows)
    ext, node = rows[5]
    by_ext = _er(tmp_path, "query", "ancestors", "--collection", "demo", "--mention", ext)
    by_id = _er(tmp_path, "query", "ancestors", "--collection", "demo", "--id", str(node))
    assert by_ext.returncode == 0 and json.loads(by_ext.stdout) == json.loads(by_id.stdout)
    assert json.loads(by_ext.stdout)  # a mention of the demo has ancestors
    missing = _er(tmp_path, "query", "ancestors", "--collection", "demo", "--mention", "nope")
    assert missing.returncode == 2 and "has no mention 'nope'" in missing.stderr
