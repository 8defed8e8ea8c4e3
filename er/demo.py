"""`er demo`: the main job end to end on whatever stores the settings name.

It makes a seeded set of noisy mentions of a few hundred entities, stores them in
the relational store, clusters them with SCC, writes the hierarchy to the graph,
evaluates it against the known entities and shows a lineage query.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from sqlalchemy.orm import Session

COLLECTION = "demo"


def make_mentions(
    n_entities: int, seed: int, dim: int = 32
) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
    """Seeded noisy mentions: (X of shape (n, dim), gold entity per row)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(n_entities, dim))
    sizes = rng.integers(2, 12, size=n_entities)
    gold = np.repeat(np.arange(n_entities), sizes)
    X = centers[gold] + rng.normal(scale=0.35, size=(gold.size, dim))
    order = rng.permutation(gold.size)
    return X[order].astype(np.float32), gold[order]


def run_demo(settings: Any, graph: Any, *, n_entities: int = 200, seed: int = 0) -> dict[str, Any]:
    """Run the demo; return the metrics it printed."""
    from er.cluster import SCC
    from er.evaluation import score_hierarchy
    from er.pipeline import fit_and_store
    from er.stores.sql import (
        EvalRun,
        get_or_create_collection,
        make_engine,
        upgrade,
        upsert_mentions,
    )

    console = Console(stderr=True)
    engine = make_engine(settings.sqlalchemy_url)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("preparing stores", total=5)
        upgrade(engine)
        graph.init_schema()
        progress.update(task, advance=1, description="making mentions")
        X, gold = make_mentions(n_entities, seed)
        records = [
            {
                "external_id": f"m{i}",
                "payload": {"vector": X[i].round(5).tolist()},
                "gold_entity": f"e{gold[i]}",
            }
            for i in range(X.shape[0])
        ]
        with Session(engine) as session, session.begin():
            coll = get_or_create_collection(session, COLLECTION, {"algorithm": "scc"})
            progress.update(task, advance=1, description="storing mentions")
            upsert_mentions(session, coll.id, 1, records)
            progress.update(task, advance=1, description="clustering (SCC) and writing the graph")
            hierarchy = fit_and_store(
                session,
                graph,
                collection_id=coll.id,
                collection=COLLECTION,
                X=X,
                estimator=SCC(n_levels=30, k=10),
                batch_seq=1,
                external_ids=[r["external_id"] for r in records],
            )
            progress.update(task, advance=1, description="evaluating")
            metrics = score_hierarchy(hierarchy, gold)
            session.add(
                EvalRun(
                    collection_id=coll.id,
                    algorithm="scc",
                    params=hierarchy.params,
                    as_of_seq=1,
                    metrics=metrics,
                )
            )
        progress.update(task, advance=1)
    engine.dispose()
    _show(console, X.shape[0], n_entities, metrics, graph)
    return metrics


def _show(console: Console, n: int, n_entities: int, metrics: dict[str, Any], graph: Any) -> None:
    table = Table(title=f"er demo: {n} mentions of {n_entities} entities, SCC")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in (
        "n_nodes",
        "dendrogram_purity",
        "best_level_pairwise_f1",
        "best_level",
        "conll_f1_at_best_level",
        "jacc_lbl",
    ):
        value = metrics[key]
        table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    console.print(table)
    level = metrics["best_level"]
    entity = graph.entity_of(COLLECTION, 0, level=level)
    members = graph.members(COLLECTION, entity)
    ancestors = graph.ancestors(COLLECTION, 0)
    console.print(
        f"mention 0: entity {entity} at level {level} holds mentions {members[:10]}"
        f"{' ...' if len(members) > 10 else ''}; {len(ancestors)} ancestors up to the root.\n"
        f"Try: er query ancestors --collection {COLLECTION} --mention m0"
    )
