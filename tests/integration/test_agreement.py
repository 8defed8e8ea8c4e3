"""The gold-free signal (issue #53): entities against their own pair model, on real stores.

Oracle: a brute-force count, in this file, over every pair inside the exported
entities and every stored NEAR edge (read by raw Cypher) across two of them, each pair
scored by the collection's stored model on a table of all its records.
"""

from __future__ import annotations

import itertools
import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.graph]


def _resolved(settings: Any, cut: float, n: int = 300) -> tuple[str, list[dict[str, str]]]:
    """``n`` FEBRL3 records in two batches, in one collection whose entities are cut at
    ``cut`` (0: the root, every record in one entity)."""
    from er.demo import febrl_records
    from er.pipeline import run_cluster, run_ingest

    name = f"a{uuid.uuid4().hex[:8]}"
    records = febrl_records()[:n]
    for start in (0, n // 2):
        run_ingest(
            settings,
            collection=name,
            records=records[start : start + n - n // 2],
            id_field="rec_id",
            gold_field="entity",
            config={"cut_threshold": cut},
        )
        run_cluster(settings, name)
    return name, records


def _brute_force(settings: Any, name: str, records: list[dict[str, str]]) -> dict[str, Any]:
    from sqlalchemy.orm import Session

    from er.match import FieldTable
    from er.pipeline import run_entities
    from er.pipeline.config import field_types, stored_model
    from er.stores.graph import open_graph_store
    from er.stores.sql import find_collection, make_engine

    engine = make_engine(settings.sqlalchemy_url)
    with Session(engine) as session:
        config = find_collection(session, name).config
    engine.dispose()
    types, model = field_types(config), stored_model(config)
    row = {r["rec_id"]: i for i, r in enumerate(records)}
    table = FieldTable(types.names)
    table.add(types.normalise(records).rows)
    entity = dict(run_entities(settings, name))
    inside = [
        (row[a], row[b])
        for a, b in itertools.combinations(sorted(entity), 2)
        if entity[a] == entity[b]
    ]
    with open_graph_store(settings.graph_url, data_dir=settings.data_dir) as graph:
        near = graph._read(
            "MATCH (a:Mention {collection: $c})-[:NEAR]-(b:Mention {collection: $c}) "
            "RETURN a.external_id AS a, b.external_id AS b",
            {"c": name},
        )
    across = sorted(
        {
            (min(row[r["a"]], row[r["b"]]), max(row[r["a"]], row[r["b"]]))
            for r in near
            if entity[r["a"]] != entity[r["b"]]
        }
    )

    def probability(pairs: list[tuple[int, int]]) -> np.ndarray:
        left = np.array([a for a, _ in pairs], np.int64)
        right = np.array([b for _, b in pairs], np.int64)
        return model.probability(table, left, right, len(records))

    p_in, p_across = probability(inside), probability(across)
    return {  # even odds, whatever the collection's cut
        "inside_pairs": len(inside),
        "inside_improbable": float(np.mean(p_in < 0.5)),
        "across_pairs": len(across),
        "across_probable": float(np.mean(p_across >= 0.5)) if across else None,
    }


@pytest.mark.parametrize(("cut", "n"), [(0.5, 300), (0.0, 60)])
def test_shares_equal_a_brute_force_count(settings: Any, cut: float, n: int) -> None:
    """At the default cut, and at 0, where every record is in one entity whose pairs
    the model mostly finds improbable; every pair is counted: no sample at this size."""
    from er.pipeline import run_status

    name, records = _resolved(settings, cut, n)
    [status] = run_status(settings, name)
    got = status["model_agreement"]
    want = _brute_force(settings, name, records)
    assert got["sampled"] is False
    assert got["inside_pairs"] == want["inside_pairs"] > 0
    assert got["across_pairs"] == want["across_pairs"]
    assert got["inside_improbable"] == pytest.approx(want["inside_improbable"])
    assert got["across_probable"] == pytest.approx(want["across_probable"])
    if cut == 0:  # one entity of different people, nothing across
        assert got["inside_improbable"] > 0.5
        assert got["across_pairs"] == 0 and got["across_probable"] is None
    else:
        assert got["across_pairs"] > 0


def test_eval_and_report_carry_the_shares(settings: Any) -> None:
    from er.pipeline import run_evaluation, run_status

    name, _ = _resolved(settings, 0.0, 60)
    out = run_evaluation(settings, name)
    [status] = run_status(settings, name)
    assert out["metrics"]["model_agreement"] == status["model_agreement"]
    html = Path(out["report_path"]).read_text()
    assert 'id="model-agreement"' in html
    shown = f"{status['model_agreement']['inside_improbable']:.1%}"
    assert shown in html
    assert json.loads(Path(out["report_path"]).with_suffix(".json").read_text())
