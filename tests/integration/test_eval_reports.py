"""Evaluation runs: `er eval`, stored runs and reports, and a real beat + worker schedule."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics.cluster import pair_confusion_matrix

from ._procs import stop_all

pytestmark = [pytest.mark.graph]


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ER_")}
    env["ER_DATA_DIR"] = str(data_dir)
    env.update(extra)
    return env


def _er(data_dir: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "er.cli", *args],
        capture_output=True,
        text=True,
        env=_env(data_dir, **extra),
        timeout=300,
    )


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("eval")
    done = _er(data, "demo", "--synthetic", "--entities", "80", "--seed", "3")
    assert done.returncode == 0, done.stderr
    return data


def test_eval_json_equals_independent_computations(demo_dir: Path) -> None:
    from er.cluster import SCC
    from er.demo import make_mentions
    from er.evaluation import cut_at_score, score_hierarchy

    done = _er(demo_dir, "eval", "--collection", "demo", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    # the same structure, rebuilt in process from the demo's seeded input
    X, gold = make_mentions(80, 3)
    h = SCC(n_levels=30, k=10).fit(X).hierarchy_
    for key, value in score_hierarchy(h, gold).items():  # the names er score uses
        assert doc[key] == pytest.approx(value), key
    pred = cut_at_score(h, doc["threshold"])
    (_, fp), (fn, tp) = pair_confusion_matrix(gold, pred) // 2
    assert doc["pairwise_prf_at_cut"][:2] == pytest.approx([tp / (tp + fp), tp / (tp + fn)])
    assert doc["n_entities"] == np.unique(pred).size
    report = Path(doc["report_path"])
    assert report.is_file() and report.with_suffix(".json").is_file()
    listed = _er(demo_dir, "report", "list", "--collection", "demo")
    assert f"{doc['run_id']}\t" in listed.stdout and str(report) in listed.stdout
    shown = _er(demo_dir, "report", "show", str(doc["run_id"]))
    assert shown.returncode == 0 and str(report) in shown.stdout.replace("\n", "")


def test_without_gold_labels_no_numbers(demo_dir: Path, tmp_path: Path) -> None:
    import shutil

    data = tmp_path / "copy"
    shutil.copytree(demo_dir, data, ignore=shutil.ignore_patterns("*.lock"))
    with sqlite3.connect(data / "er.sqlite3") as db:
        db.execute("UPDATE mentions SET gold_entity = NULL")
    done = _er(data, "eval", "--collection", "demo", "--json")
    assert done.returncode == 2
    assert "has no gold labels" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout.strip() == ""
    missing = _er(data, "eval", "--collection", "nope")
    assert missing.returncode == 2 and "no collection 'nope'" in missing.stderr


@pytest.mark.celery
@pytest.mark.slow
def test_beat_and_worker_evaluate_on_schedule(demo_dir: Path) -> None:
    db = 1 + uuid.uuid4().int % 15  # a Redis database of its own
    extra = {
        "ER_BROKER_URL": f"redis://127.0.0.1:6379/{db}",
        "ER_EVAL_SCHEDULE": json.dumps({"demo": 2}),
    }
    with sqlite3.connect(demo_dir / "er.sqlite3") as conn:
        before = conn.execute("SELECT count(*) FROM eval_runs").fetchone()[0]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "er.cli", what],
            env=_env(demo_dir, **extra),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for what in ("worker", "beat")
    ]
    try:
        deadline = time.monotonic() + 90
        rows: list[tuple[int, str]] = []
        while time.monotonic() < deadline and len(rows) < before + 2:
            time.sleep(1)
            with sqlite3.connect(demo_dir / "er.sqlite3") as conn:
                rows = conn.execute("SELECT id, report_path FROM eval_runs").fetchall()
        assert len(rows) >= before + 2, [p.poll() for p in procs]
        new = [Path(path) for _, path in rows[before:]]
        assert all(p.is_file() and p.with_suffix(".json").is_file() for p in new)
    finally:
        stop_all(procs, db)
