"""The `er cluster` / `er score` command-line contract, run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ER = [sys.executable, "-m", "er.cli"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ER, *args], capture_output=True, text=True, timeout=300)


ALGORITHMS = ["scc", "mbscc", "grinch", "rotate", "greedy", "llama", "affinity", "recipnn"]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_cluster_then_score(tmp_path: Path, algorithm: str) -> None:
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(5), 8)
    X = (rng.normal(size=(5, 6))[y] * 5 + rng.normal(size=(40, 6)) * 0.3).astype(np.float32)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    params = ["--batch-size", "7"] if algorithm in ("grinch", "rotate", "greedy", "mbscc") else []
    params += [] if algorithm in ("grinch", "rotate", "greedy") else ["--param", "k=5"]
    done = _run(
        "cluster", "--algorithm", algorithm, "--input", str(tmp_path / "X.npy"),
        *params, "--output", str(tmp_path / "S.json"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "S.json").read_text())
    assert doc["n_points"] == 40 and doc["algorithm"] == algorithm
    children = [c for c, _ in doc["edges"]]
    if algorithm != "llama":
        assert len(children) == len(set(children))  # a tree: one parent each
    assert all(int(v) >= 40 for v in doc["nodes"])
    scored = _run(
        "score", "--structure", str(tmp_path / "S.json"), "--labels", str(tmp_path / "y.npy")
    )
    assert scored.returncode == 0, scored.stderr
    metrics = json.loads(scored.stdout)
    assert {"jacc_node", "jacc_pt", "jacc_lbl", "n_nodes"} <= set(metrics)
    if algorithm == "llama":  # a DAG: Jaccard metrics only
        assert metrics["jacc_lbl"] == 1.0
    elif algorithm == "greedy":  # no guarantee (dissertation §3.1): it scores 0.742 here
        from er.cluster import Grinch
        from er.evaluation import dendrogram_purity

        # the CLI's batches of 7, JSON round trip and scoring equal one in-process fit
        direct = dendrogram_purity(Grinch(mode="greedy").fit(X).hierarchy_, y)
        assert metrics["dendrogram_purity"] == pytest.approx(direct, abs=1e-12)
        assert metrics["dendrogram_purity"] < 0.9  # and it is no exact tree here
    else:
        assert {"dendrogram_purity", "best_level_pairwise_f1"} <= set(metrics)
        assert metrics["dendrogram_purity"] == 1.0


def test_bad_input_names_the_file_and_row(tmp_path: Path) -> None:
    X = np.ones((4, 3), np.float32)
    X[2, 1] = np.nan
    np.save(tmp_path / "X.npy", X)
    done = _run(
        "cluster",
        "--algorithm",
        "scc",
        "--input",
        str(tmp_path / "X.npy"),
        "--output",
        str(tmp_path / "S.json"),
    )
    assert done.returncode == 2
    assert "row 2 has a non-finite value" in done.stderr
    assert not (tmp_path / "S.json").exists()


def test_bad_parameter_is_a_clear_error(tmp_path: Path) -> None:
    np.save(tmp_path / "X.npy", np.eye(4, dtype=np.float32))
    done = _run(
        "cluster",
        "--algorithm",
        "scc",
        "--input",
        str(tmp_path / "X.npy"),
        "--param",
        "n_levels=0",
        "--output",
        str(tmp_path / "S.json"),
    )
    assert done.returncode == 2
    assert "'n_levels' parameter of SCC must be an int" in done.stderr


def test_cluster_with_the_annoy_graph(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    y = np.repeat(np.arange(6), 10)
    X = (rng.normal(size=(6, 8))[y] * 5 + rng.normal(size=(60, 8)) * 0.3).astype(np.float32)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    done = _run("cluster", "--algorithm", "scc", "--neighbors", "annoy", "--input",
                str(tmp_path / "X.npy"), "--output", str(tmp_path / "S.json"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    scored = _run("score", "--structure", str(tmp_path / "S.json"), "--labels",
                  str(tmp_path / "y.npy"))  # fmt: skip
    assert json.loads(scored.stdout)["dendrogram_purity"] == 1.0


def _explain_answer(model: dict[str, object] | None) -> dict[str, object]:
    """An explain answer as er.pipeline.queries.explain_pair gives it: a and b joined
    under node 7 at linkage 0.564, above the cut 0.5."""
    node = {"id": 7, "score": 0.564}
    return {
        "a": "a1", "b": "b1", "together": True, "cut": 0.5, "entity_a": 3, "entity_b": 3,
        "path_a": [node], "path_b": [node], "lca": node, "deciding": node,
        "near": [], "fields": {"name": 1.0}, "model": model,
        "confidence": {"p": None, "why": "not asked"},
    }  # fmt: skip


def test_explain_says_linkages_were_scored_when_merged(capsys) -> None:
    """A merge's linkage was scored at the collection's size then, the pair's
    probability now (a pair at 0.44 joined at 0.564): a pair-model explain says which
    is which; a cosine collection's, which has no prior, does not."""
    from er.cli.query import _print_lineage

    field = {"field": "name", "a": "x", "b": "x", "level": "exact", "weight": 9.0}
    scored = {"version": 2, "population": 100_000, "fields": [field], "prior_weight": -16.6}
    model = {**scored, "match_weight": -0.2, "probability": 0.44, "link": None}
    _print_lineage("explain", _explain_answer(model))
    text = capsys.readouterr().out
    assert "linkage 0.564 >= 0.5" in text
    assert "linkages as scored when each merge was made" in text
    assert "probabilities below at 100,000 mentions" in text
    _print_lineage("explain", _explain_answer(None))
    assert "when each merge was made" not in capsys.readouterr().out
