"""The README's main job, `er demo`, on embedded defaults (SQLite + embedded FalkorDB):
FEBRL3 through the pipeline, and the synthetic SCC demo (``--synthetic``)."""

from __future__ import annotations

import json
import os
import sqlite3
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


@pytest.mark.slow
def test_febrl3_demo_resolves_records_and_a_rerun_changes_nothing(tmp_path: Path) -> None:
    from er.demo import febrl_records
    from er.evaluation import bcubed, pairwise_prf

    done = _er(tmp_path, "demo", "--json")
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["n_mentions"] == 5000 and figures["n_gold_entities"] == 2000
    # recompute the scores from the exported entities, not from the demo's own numbers
    export = _er(tmp_path, "export", "entities", "--collection", "febrl3")
    assert export.returncode == 0, export.stderr
    lines = export.stdout.strip().splitlines()
    assert lines[0] == "external_id,entity_id" and len(lines) == 5001
    entity = dict(line.split(",") for line in lines[1:])
    gold = {r["rec_id"]: r["entity"] for r in febrl_records()}
    ids = sorted(entity)
    pred, truth = [entity[i] for i in ids], [gold[i] for i in ids]
    assert pairwise_prf(truth, pred)[2] >= 0.998
    assert bcubed(truth, pred)[2] >= 0.998
    assert figures["pairwise_prf"][2] == pytest.approx(pairwise_prf(truth, pred)[2], abs=1e-6)
    stats = json.loads(_er(tmp_path, "query", "stats", "--collection", "febrl3").stdout)
    again = _er(tmp_path, "demo", "--json")  # every record is a duplicate now
    assert again.returncode == 0, again.stderr
    assert json.loads(_er(tmp_path, "query", "stats", "--collection", "febrl3").stdout) == stats
    again_export = _er(tmp_path, "export", "entities", "--collection", "febrl3")
    assert again_export.returncode == 0, again_export.stderr
    assert again_export.stdout == export.stdout


def test_demo_then_query_on_embedded_defaults(tmp_path: Path) -> None:
    done = _er(tmp_path, "demo", "--synthetic", "--entities", "40")
    assert done.returncode == 0, done.stderr
    # the result is on stdout like every command's (issue #55); progress stays on stderr
    assert "dendrogram_purity" in done.stdout and "Try: er query" in done.stdout
    assert (tmp_path / "er.sqlite3").exists() and (tmp_path / "falkordb").is_dir()
    with sqlite3.connect(tmp_path / "er.sqlite3") as db:  # er status reads the finish time
        rows = db.execute("SELECT status, finished_at IS NOT NULL FROM batches").fetchall()
    assert rows == [("done", 1)]
    stats = json.loads(_er(tmp_path, "query", "stats", "--collection", "demo").stdout)
    assert stats["nodes"] > 40 and stats["current_edges"] == stats["nodes"] - 1  # one tree
    again = _er(
        tmp_path, "demo", "--synthetic", "--entities", "40"
    )  # same seed: replay changes nothing
    assert again.returncode == 0, again.stderr
    assert json.loads(_er(tmp_path, "query", "stats", "--collection", "demo").stdout) == stats
    members = json.loads(
        _er(
            tmp_path, "query", "members", "--collection", "demo", "--id", str(stats["nodes"] - 1)
        ).stdout
    )
    assert len(members) > 40  # the root holds every mention


def test_demo_with_other_input_is_refused_not_merged(tmp_path: Path) -> None:
    assert _er(tmp_path, "demo", "--synthetic", "--entities", "30").returncode == 0
    stats = json.loads(_er(tmp_path, "query", "stats", "--collection", "demo").stdout)
    other = _er(tmp_path, "demo", "--synthetic", "--entities", "30", "--seed", "1")
    assert other.returncode == 2
    assert "batch 1 of collection 'demo' was already resolved from other input" in other.stderr
    assert "Traceback" not in other.stderr
    # before the fix the second hierarchy was merged into batch 1
    assert json.loads(_er(tmp_path, "query", "stats", "--collection", "demo").stdout) == stats


def test_demo_without_entities_is_refused(tmp_path: Path) -> None:
    done = _er(tmp_path, "demo", "--synthetic", "--entities", "0")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("--entities must be at least 1. Got 0.")


def test_query_by_external_id(tmp_path: Path) -> None:
    import sqlite3

    assert _er(tmp_path, "demo", "--synthetic", "--entities", "25").returncode == 0
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
