"""Evaluation runs: `er eval`, stored runs and reports, and a real beat + worker schedule."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics.cluster import pair_confusion_matrix

from ._cli import embedded_env, er, ingest_and_eval
from ._procs import own_redis_db, stop_all

pytestmark = [pytest.mark.graph]


_env, _er = embedded_env, er


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
    db = own_redis_db()
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


_ingest_and_eval = ingest_and_eval


def _export(data: Path, collection: str) -> dict[str, str]:
    import csv
    import io

    done = _er(data, "export", "entities", "--collection", collection)
    assert done.returncode == 0, done.stderr
    return {r["external_id"]: r["entity_id"] for r in csv.DictReader(io.StringIO(done.stdout))}


def _independent(gold: list[str], pred: list[str]) -> tuple[float, float, float, float]:
    """Pairwise P/R from scikit-learn's pair confusion matrix; B-cubed P/R by brute force."""
    C = pair_confusion_matrix(gold, pred)
    tp, fp, fn = C[1, 1], C[0, 1], C[1, 0]
    p_pair = tp / (tp + fp) if tp + fp else 1.0
    r_pair = tp / (tp + fn) if tp + fn else 1.0
    n = len(gold)
    same_pred = [[j for j in range(n) if pred[j] == pred[i]] for i in range(n)]
    same_gold = [[j for j in range(n) if gold[j] == gold[i]] for i in range(n)]
    p_b3 = sum(sum(gold[j] == gold[i] for j in same_pred[i]) / len(same_pred[i]) for i in range(n))
    r_b3 = sum(sum(pred[j] == pred[i] for j in same_gold[i]) / len(same_gold[i]) for i in range(n))
    return float(p_pair), float(r_pair), p_b3 / n, r_b3 / n


@pytest.mark.parametrize("which", ["febrl2", "refused"])
def test_report_scores_the_entities_users_export(tmp_path: Path, which: str) -> None:
    """Issue #31: eval's figures equal those computed from `er export entities` on the
    same collection, to 1e-9; refused records are counted and scored as their own
    entities in the *_all_records figures."""
    from er.demo import febrl_records

    records = febrl_records("dataset2")[:1500] if which == "febrl2" else febrl_records()[:600]
    refused = []
    if which == "refused":  # bad records with gold labels: no usable field, a list field
        refused = [
            {"rec_id": "bad-1", "entity": records[0]["entity"], "given_name": ["x"]},
            {"rec_id": "bad-2", "entity": "lonely", "surname": {"a": 1}},
        ]
    data, doc = _ingest_and_eval(tmp_path, [*records, *refused])
    exported = _export(data, "c")
    ids = [r["rec_id"] for r in records]
    gold = [r["entity"] for r in records]
    p, r, p3, r3 = _independent(gold, [exported[i] for i in ids])
    assert doc["entities_scored"] == "stored"
    assert doc["pairwise_prf_at_cut"][:2] == pytest.approx([p, r], abs=1e-9)
    assert doc["bcubed_at_cut"][:2] == pytest.approx([p3, r3], abs=1e-9)
    assert doc["refused"] == len(refused) and doc["refused_with_gold"] == len(refused)
    if refused:
        gold_all = gold + [x["entity"] for x in refused]
        pred_all = [exported[i] for i in ids] + [f"refused-{k}" for k in range(len(refused))]
        p, r, p3, r3 = _independent(gold_all, pred_all)
        assert doc["pairwise_prf_all_records"][:2] == pytest.approx([p, r], abs=1e-9)
        assert doc["bcubed_all_records"][:2] == pytest.approx([p3, r3], abs=1e-9)
        assert doc["pairwise_prf_all_records"][1] < doc["pairwise_prf_at_cut"][1]
    else:
        assert "pairwise_prf_all_records" not in doc


def test_eval_threshold_previews_another_cut_and_stores_nothing(demo_dir: Path) -> None:
    from er.cluster import SCC
    from er.demo import make_mentions
    from er.evaluation import cut_at_score, pairwise_prf

    before = _er(demo_dir, "report", "list", "--collection", "demo").stdout
    done = _er(demo_dir, "eval", "--collection", "demo", "--threshold", "0.2", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    assert doc["run_id"] is None and doc["report_path"] is None
    assert doc["entities_scored"] == "preview of cut 0.2"
    X, gold = make_mentions(80, 3)
    label = cut_at_score(SCC(n_levels=30, k=10).fit(X).hierarchy_, 0.2)
    assert doc["pairwise_prf_at_cut"] == pytest.approx(list(pairwise_prf(gold, label)))
    assert _er(demo_dir, "report", "list", "--collection", "demo").stdout == before


def test_report_shows_errors_field_by_field_with_the_models_reasons(tmp_path: Path) -> None:
    """Issue #29: a false merge appears as its records, one row per field, with the pair
    model's level and weight for the pair that shows it, and the weights are plotted."""
    import re

    from er.demo import febrl_records

    records = febrl_records()[:300]
    twin = dict(records[0], rec_id="twin-of-0", entity="someone-else")  # same values
    _, doc = _ingest_and_eval(tmp_path, [*records, twin])
    report = Path(doc["report_path"])
    # records are quoted: the report and its folder are the owner's alone (issue #54)
    assert report.stat().st_mode & 0o777 == 0o600 and report.parent.stat().st_mode & 0o777 == 0o700
    page = report.read_text()
    assert 'id="plot-weights"' in page and "<svg" in page
    merges = page[page.index('id="false-merges"') : page.index('id="splits"')]
    assert "twin-of-0" in merges
    table = merges[merges.index('class="link-fields"') :]
    for field in ("given_name", "surname", "date_of_birth", "soc_sec_id"):
        assert re.search(rf"<th>{field}</th>", table), field
    assert ">exact<" in table  # the twin agrees with its original field by field
    # the deciding link is the twin and its original: two gold entities, one record
    assert re.search(
        r"Deciding link: <b>(twin-of-0|rec-\S+)</b> and <b>(twin-of-0|rec-\S+)</b>", merges
    )
