"""The `er` command.

er init                          create or upgrade the relational and graph stores
er demo                          the main job on embedded defaults (no services)
er ingest FILE --collection C    records in (JSONL or CSV), entities out
er status / er export entities   batches and lag; entity of every mention (CSV)
er cluster ...                   run a clustering core on X.npy, write S.json
er score ...                     metrics of S.json against gold labels (JSON)
er query ...                     canned lineage queries against the graph store
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from er.exceptions import ERError

logger = logging.getLogger("er")

ALGORITHMS = (
    "scc",
    "mbscc",
    "grinch",
    "rotate",
    "greedy",
    "llama",
    "affinity",
    "recipnn",
    "trellis-map",
    "ghhc",
)
INCREMENTAL = ("mbscc", "grinch", "rotate", "greedy")


# -- er cluster / er score -------------------------------------------------------------
def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _parse_params(items: Sequence[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ERError(f"--param takes NAME=VALUE. Got {item!r} instead.")
        params[name] = _parse_value(value)
    return params


def make_estimator(algorithm: str, params: dict[str, Any]) -> Any:
    """The estimator an `er cluster --algorithm` name stands for."""
    from er import cluster

    classes: dict[str, Callable[..., Any]] = {
        "scc": cluster.SCC,
        "mbscc": cluster.MBSCC,
        "llama": cluster.Llama,
        "affinity": cluster.Affinity,
        "recipnn": cluster.RecipNN,
        "grinch": cluster.Grinch,
        "rotate": cluster.Grinch,
        "greedy": cluster.Grinch,
        "trellis-map": cluster.TrellisMAP,
        "ghhc": lambda **p: cluster.GHHC(on_epoch=_EpochBar("ghhc"), **p),
    }
    if algorithm not in classes:
        raise ERError(f"--algorithm must be one of {', '.join(classes)}. Got {algorithm!r}.")
    if algorithm in ("rotate", "greedy"):
        params = {**params, "mode": algorithm}
    try:
        return classes[algorithm](**params)
    except TypeError as exc:
        raise ERError(f"{algorithm}: {exc}") from None


class _EpochBar:
    """A rich progress bar fed by an estimator's ``on_epoch(epoch, n_epochs, loss)``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._bar: Any = None

    def __call__(self, epoch: int, n_epochs: int, loss: float) -> None:
        from rich.console import Console
        from rich.progress import Progress

        if self._bar is None:
            self._bar = Progress(transient=True, console=Console(stderr=True))
            self._bar.start()
            self._task = self._bar.add_task(f"{self.name}: epochs", total=n_epochs)
        self._bar.update(self._task, completed=epoch, description=f"{self.name}: loss {loss:.4g}")
        if epoch >= n_epochs:
            self._bar.stop()
            self._bar = None


GRAPH_ALGORITHMS = ("scc", "llama", "affinity", "recipnn")  # the ones that take graph=


def _read_array(path: Path, what: str) -> np.ndarray:
    """``np.load`` with one clear line for every way a file can be wrong."""
    if not path.is_file():
        raise ERError(f"{path}: no such file ({what}).")
    try:
        array: np.ndarray = np.load(path, allow_pickle=False)
        return array
    except (ValueError, OSError, EOFError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ERError(f"{path}: not a readable .npy array of {what} ({reason}).") from None


def _load_points(path: Path) -> np.ndarray:
    X = _read_array(path, "points")
    if X.ndim != 2 or not np.issubdtype(X.dtype, np.floating):
        raise ERError(f"{path}: expected a float (n, d) array. Got {X.dtype} {X.shape}.")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ERError(f"{path}: the array {X.shape} has no points to cluster.")
    if not np.all(np.isfinite(X)):
        row = int(np.flatnonzero(~np.isfinite(X).all(axis=1))[0])
        raise ERError(f"{path}: row {row} has a non-finite value.")
    zero = np.flatnonzero(~X.any(axis=1))
    if zero.size:
        raise ERError(
            f"{path}: row {int(zero[0])} is all zeros ({zero.size} such rows); cosine "
            "similarity needs a non-zero vector per point."
        )
    return X


def _check_options(args: argparse.Namespace) -> None:
    """Refuse options the chosen algorithm would silently ignore."""
    if args.neighbors == "annoy" and args.algorithm not in GRAPH_ALGORITHMS:
        raise ERError(
            f"--neighbors annoy applies to {', '.join(GRAPH_ALGORITHMS)}; "
            f"{args.algorithm} searches its own neighbours. Drop --neighbors."
        )
    if args.batch_size is not None and args.algorithm not in INCREMENTAL:
        raise ERError(
            f"--batch-size applies to the incremental algorithms ({', '.join(INCREMENTAL)}); "
            f"{args.algorithm} fits all points at once. Drop --batch-size."
        )
    if not args.output.parent.is_dir():
        raise ERError(f"{args.output}: the folder {args.output.parent} does not exist.")


def cmd_cluster(args: argparse.Namespace) -> int:
    _check_options(args)
    X = _load_points(args.input)
    est = make_estimator(args.algorithm, _parse_params(args.param))
    started = time.perf_counter()
    if args.algorithm in INCREMENTAL:
        _fit_in_batches(est, X, args.batch_size or X.shape[0], args.algorithm)
    elif args.neighbors == "annoy":
        from er.ann import annoy_knn_graph

        with _progress(f"annoy {getattr(est, 'k', 10)}-NN graph of {X.shape[0]} points"):
            graph = annoy_knn_graph(X, getattr(est, "k", 10))
        with _progress(f"{args.algorithm} on {X.shape[0]} points"):
            est.fit(X, graph=graph)
    elif args.neighbors == "auto" and args.algorithm in GRAPH_ALGORITHMS:
        # exact below the index's threshold (the same graph as est.fit(X)), hnswlib above
        from er.ann import index_knn_graph

        with _progress(f"auto {getattr(est, 'k', 10)}-NN graph of {X.shape[0]} points"):
            graph = index_knn_graph(X, getattr(est, "k", 10), backend="auto")
        with _progress(f"{args.algorithm} on {X.shape[0]} points"):
            est.fit(X, graph=graph)
    else:
        with _progress(f"{args.algorithm} on {X.shape[0]} points"):
            est.fit(X)
    hierarchy = est.hierarchy_
    args.output.write_text(json.dumps(hierarchy.to_json()))
    logger.info(
        "%s: %d nodes in %.2f s -> %s",
        args.algorithm,
        hierarchy.n_nodes,
        time.perf_counter() - started,
        args.output,
    )
    return 0


def _fit_in_batches(est: Any, X: np.ndarray, batch: int, name: str) -> None:
    """partial_fit over consecutive row blocks, with a progress bar."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    if batch < 1:
        raise ERError(f"--batch-size must be >= 1. Got {batch}.")
    columns = (BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*Progress.get_default_columns()[:1], *columns, transient=True) as progress:
        task = progress.add_task(f"{name}: points", total=X.shape[0])
        for start in range(0, X.shape[0], batch):
            est.partial_fit(X[start : start + batch])
            progress.update(task, advance=min(batch, X.shape[0] - start))


def cmd_score(args: argparse.Namespace) -> int:
    from er.cluster import Hierarchy
    from er.evaluation import score_hierarchy

    if not args.structure.is_file():
        raise ERError(f"{args.structure}: no such file (structure JSON).")
    try:
        hierarchy = Hierarchy.from_json(json.loads(args.structure.read_text()))
    except (ValueError, KeyError, TypeError) as exc:
        raise ERError(f"{args.structure}: not an `er cluster` structure ({exc}).") from None
    labels = _read_array(args.labels, "labels")
    if labels.ndim != 1 or labels.shape[0] != hierarchy.n_points:
        raise ERError(
            f"{args.labels}: expected one label per point, shape ({hierarchy.n_points},); "
            f"got {labels.shape}."
        )
    sys.stdout.write(json.dumps(score_hierarchy(hierarchy, labels)) + "\n")
    return 0


# -- er init / er query / er demo -------------------------------------------------------
def _settings() -> Any:
    from er.config import get_settings

    settings = get_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return settings


def _graph(settings: Any) -> Any:
    from er.stores.graph import open_graph_store

    return open_graph_store(
        settings.graph_url,
        data_dir=settings.data_dir,
        graph_name=settings.graph_name,
        user=settings.graph_user,
        password=settings.graph_password,
    )


def _database(settings: Any) -> Any:
    """An engine on ``ER_DATABASE_URL``, checked to answer; one clear line if not."""
    import sqlalchemy.exc

    from er.stores.sql import make_engine

    try:
        engine = make_engine(settings.sqlalchemy_url)
        with engine.connect():
            pass
    except (sqlalchemy.exc.SQLAlchemyError, ImportError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ERError(f"cannot reach the database (ER_DATABASE_URL): {first}") from None
    return engine


def cmd_init(args: argparse.Namespace) -> int:
    from er.stores.sql import upgrade

    settings = _settings()
    engine = _database(settings)
    upgrade(engine)
    engine.dispose()
    with _graph(settings) as graph:
        graph.init_schema()
    logger.info(
        "stores ready: %s, %s", engine.url.render_as_string(hide_password=True), settings.graph_url
    )
    return 0


def _node_arg(graph: Any, args: argparse.Namespace) -> int:
    """The node ``--id`` names, or the node of the record ingested as ``--mention``."""
    if args.mention is None:
        return int(args.id)
    node: int | None = graph.node_of(args.collection, args.mention)
    if node is None:
        raise ERError(f"collection {args.collection!r} has no mention {args.mention!r}.")
    return node


_LINEAGE_ARITY = {"entity": 1, "history": 1, "explain": 2}


def _lineage_mentions(args: argparse.Namespace) -> list[str]:
    """The external ids an entity/history/explain query names (positional or --mention)."""
    mentions = list(args.mentions) or ([args.mention] if args.mention is not None else [])
    want = _LINEAGE_ARITY[args.what]
    if len(mentions) != want:
        usage = "MENTION_A MENTION_B" if want == 2 else "MENTION"
        raise ERError(
            f"er query {args.what} takes {usage} (external ids). Got {len(mentions)} id(s)."
        )
    return mentions


def _print_lineage(what: str, result: dict[str, Any]) -> None:
    """Human-readable lines of an entity/history/explain answer."""
    out = sys.stdout.write
    if what == "entity":
        when = "now" if result["as_of"] is None else f"as of batch {result['as_of']}"
        out(f"mention {result['mention']!r} is in entity {result['entity']} {when} ")
        out(f"(minted at batch {result['minted']}), {len(result['members'])} member(s):\n")
        out("  " + ", ".join(result["members"]) + "\n")
        return
    if what == "history":
        for m in result["memberships"]:
            until = "now" if m["until"] is None else f"batch {m['until']}"
            out(f"entity {m['entity']}: batch {m['since']} .. {until}\n")
            for e in m["events"]:
                out(f"  batch {e['batch']}: {e['kind']} {e['from']} -> {e['to']}\n")
        return
    verdict = "together" if result["together"] else "apart"
    out(f"{result['a']!r} and {result['b']!r}: {verdict} at cut {result['cut']} ")
    out(f"(entities {result['entity_a']} and {result['entity_b']})\n")
    for key in ("path_a", "path_b"):
        steps = " -> ".join(f"{x['id']} ({_score(x['score'])})" for x in result[key])
        out(f"  {key}: {steps or '(no ancestors)'}\n")
    lca = result["lca"]
    out("  lowest common ancestor: " + ("none" if lca is None else str(lca["id"])) + "\n")
    d = result["deciding"]
    if d is not None:
        sign = ">=" if result["together"] else "<"
        out(f"  the cut turns on node {d['id']}: linkage {_score(d['score'])} {sign} ")
        out(f"{result['cut']}\n")
    for e in result["near"]:
        out(f"  k-NN edge: {e['a']} ~ {e['b']} cosine {e['sim']:.3f}\n")
    fields = ", ".join(f"{k} {_score(v)}" for k, v in result["fields"].items())
    out(f"  field cosines: {fields}\n")
    conf = result["confidence"]
    if conf["p"] is None:
        out(f"  confidence: none ({conf['why']})\n")
    else:
        out(f"  confidence: P(one entity at the cut) = {conf['p']:.3f} (exact, trellis)\n")


def _score(value: Any) -> str:
    return "-" if value is None else f"{float(value):.3f}"


def cmd_query(args: argparse.Namespace) -> int:
    settings = _settings()
    stable_entity = args.what == "entity" and args.score is None and args.level is None
    if args.what in ("history", "explain") or stable_entity:
        from er.pipeline import run_lineage

        mentions = _lineage_mentions(args)
        result: Any = run_lineage(settings, args.what, args.collection, mentions, as_of=args.as_of)
        if args.json:
            sys.stdout.write(json.dumps(result) + "\n")
        else:
            _print_lineage(args.what, result)
        return 0
    if args.what == "confidence" and args.mentions and args.mention is None:
        args.mention = args.mentions[0] if len(args.mentions) == 1 else None
    elif args.mentions:
        raise ERError(f"er query {args.what} takes --mention or --id, not positional ids.")
    if args.what == "confidence":
        from er.pipeline import run_confidence

        if (args.mention is None) == (args.entity is None):
            raise ERError("er query confidence takes --mention EXTERNAL_ID or --entity ID.")
        result = run_confidence(settings, args.collection, args.mention, args.entity)
        sys.stdout.write(json.dumps(result) + "\n")
        return 0
    with _graph(settings) as graph:
        if args.what != "stats":
            args.id = _node_arg(graph, args)
        if args.what == "ancestors":
            result = graph.ancestors(args.collection, args.id, as_of=args.as_of)
        elif args.what == "members":
            result = graph.members(args.collection, args.id, as_of=args.as_of)
        elif args.what == "entity":
            result = graph.entity_of(
                args.collection, args.id, score=args.score, level=args.level, as_of=args.as_of
            )
        else:
            result = graph.stats(args.collection)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    settings = _settings()
    _database(settings).dispose()
    if args.synthetic:
        from er.demo import run_demo

        if args.entities < 1:
            raise ERError(f"--entities must be at least 1. Got {args.entities}.")
        with _graph(settings) as graph:
            run_demo(settings, graph, n_entities=args.entities, seed=args.seed)
        return 0
    from er.demo import run_febrl_demo

    figures = run_febrl_demo(settings, batch_size=args.batch_size)
    if args.json:
        sys.stdout.write(json.dumps(figures) + "\n")
    return 0


# -- er ingest / er status / er export ------------------------------------------------------
def _json_arg(text: str | None, what: str) -> Any:
    """JSON given inline or as @path; one clear line when it is not JSON."""
    if text is None:
        return None
    source = text
    if text.startswith("@"):
        path = Path(text[1:])
        if not path.is_file():
            raise ERError(f"{what}: no such file {path}.")
        source = path.read_text(encoding="utf-8")
    try:
        return json.loads(source)
    except json.JSONDecodeError as exc:
        raise ERError(f"{what} is not JSON: {exc}") from None


def cmd_ingest(args: argparse.Namespace) -> int:
    from er.records import read_chunks

    settings = _settings()
    common = {
        "collection": args.collection,
        "id_field": args.id_field,
        "gold_field": args.gold_field,
        "config": _json_arg(args.config, "--config"),
    }
    chunks = read_chunks(args.file, args.batch_size, args.format)
    if settings.broker_url:
        summary = _ingest_queued(settings, args, common, chunks)
    else:
        summary = _ingest_in_process(settings, args, common, chunks)
    if args.json:
        sys.stdout.write(json.dumps(summary) + "\n")
    return 0


def _line_count(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for line in f if line.strip())


# Batches ingested before they are clustered in process: one run over several pending
# batches writes batch b's delta to the graph while it steps batch b+1 (er.pipeline._Lane).
INGEST_AHEAD = 8


def _groups(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Consecutive lists of ``size`` items (the last may be shorter)."""
    group: list[Any] = []
    for item in items:
        group.append(item)
        if len(group) == size:
            yield group
            group = []
    if group:
        yield group


def _ingest_in_process(
    settings: Any, args: argparse.Namespace, common: dict[str, Any], chunks: Any
) -> dict[str, Any]:
    """ER_BROKER_URL unset: run the ingest and cluster steps here, batch by batch."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from er.pipeline import run_cluster, run_ingest
    from er.stores.sql import upgrade

    engine = _database(settings)
    upgrade(engine)
    engine.dispose()
    totals = {"batches": 0, "accepted": 0, "duplicates": 0, "rejected": 0, "failed": 0}
    reasons: list[str] = []
    lines: dict[int, int] = {}  # batch seq -> its lines, advanced once the batch resolves
    columns = (BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*Progress.get_default_columns()[:1], *columns, transient=True) as progress:
        task = progress.add_task(f"{args.collection}: records", total=_line_count(args.file))

        def resolved(report: dict[str, Any]) -> None:
            totals["failed"] += int("error" in report)
            progress.update(task, advance=lines.pop(report["batch_seq"], 0))

        for group in _groups(chunks, INGEST_AHEAD):
            for chunk in group:
                out = run_ingest(
                    settings,
                    records=chunk.records,
                    rejects=chunk.rejects,
                    where=chunk.where,
                    **common,
                )
                if out["accepted"]:
                    lines[out["batch_seq"]] = len(chunk)
                else:  # nothing to cluster: the batch is done already
                    progress.update(task, advance=len(chunk))
                totals["batches"] += 1
                for key in ("accepted", "duplicates", "rejected"):
                    totals[key] += out[key]
                reasons += out["reasons"]
            run_cluster(settings, args.collection, on_batch=resolved)
    _print_ingest(args.collection, totals, reasons)
    return {"collection": args.collection, **totals}


def _ingest_queued(
    settings: Any, args: argparse.Namespace, common: dict[str, Any], chunks: Any
) -> dict[str, Any]:
    """ER_BROKER_URL set: queue one er.ingest task per batch; --wait for them to resolve."""
    from er.stores.sql import upgrade
    from workers.tasks import ingest

    engine = _database(settings)  # --wait reads the batches; the schema must be there
    upgrade(engine)
    engine.dispose()
    results = [
        ingest.apply_async(
            kwargs={**common, "records": c.records, "rejects": c.rejects, "where": c.where}
        )
        for c in chunks
    ]
    sys.stderr.write(f"queued {len(results)} batch(es) of {args.collection}\n")
    for r in results:
        sys.stdout.write(f"{r.id}\n")
    if not args.wait:
        return {"collection": args.collection, "queued": [r.id for r in results]}
    outs = [_task_result(r, args.timeout) for r in results]
    seqs = {o["batch_seq"] for o in outs}
    _wait_resolved(settings, args.collection, seqs, args.timeout)
    totals = {k: sum(o[k] for o in outs) for k in ("accepted", "duplicates", "rejected")}
    reasons = [x for o in outs for x in o["reasons"]]
    _print_ingest(args.collection, {"batches": len(outs), **totals}, reasons)
    return {"collection": args.collection, "batch_seqs": sorted(seqs), **totals}


def _task_result(result: Any, timeout: float) -> Any:
    """A task's return value; its failure as one line (the worker logs the traceback)."""
    try:
        return result.get(timeout=timeout, propagate=True)
    except Exception as exc:  # Celery re-raises the worker's exception type here
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ERError(
            f"task {result.id} failed in the worker: {type(exc).__name__}: {first}"
        ) from None


def _wait_resolved(settings: Any, collection: str, seqs: set[int], timeout: float) -> None:
    from sqlalchemy.orm import Session

    from er.stores.sql import Batch, find_collection

    engine = _database(settings)
    deadline = time.monotonic() + timeout
    try:
        while True:
            with Session(engine) as session:
                coll = find_collection(session, collection)
                if coll is None:  # the workers wrote to another database than this one reads
                    raise ERError(f"no collection {collection!r}.")
                statuses = [
                    b.status
                    for b in session.query(Batch).filter(
                        Batch.collection_id == coll.id, Batch.seq.in_(seqs)
                    )
                ]
            if all(s in ("done", "failed") for s in statuses):
                return
            if time.monotonic() > deadline:
                raise ERError(f"{collection}: batches not resolved after {timeout:.0f} s.")
            time.sleep(0.2)
    finally:
        engine.dispose()


def _print_ingest(collection: str, totals: dict[str, int], reasons: list[str]) -> None:
    for reason in reasons[:10]:
        sys.stderr.write(f"rejected: {reason}\n")
    if len(reasons) > 10:
        sys.stderr.write("... and more; see the rejected_records table\n")
    parts = ", ".join(f"{v} {k}" for k, v in totals.items())
    sys.stderr.write(f"{collection}: {parts}\n")


def cmd_status(args: argparse.Namespace) -> int:
    from er.pipeline import run_status

    settings = _settings()
    _database(settings).dispose()
    rows = run_status(settings, args.collection)
    if args.json:
        sys.stdout.write(json.dumps(rows) + "\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="er status")
    for name in ("collection", "done", "pending", "running", "failed", "mentions", "rejected"):
        table.add_column(name, justify="left" if name == "collection" else "right")
    table.add_column("lag", justify="right")
    for r in rows:
        b = r["batches"]
        counts = [str(b.get(k, 0)) for k in ("done", "pending", "running", "failed")]
        extra = [str(r["mentions"]), str(r["rejected"]), f"{r['lag_s']:.1f} s"]
        table.add_row(r["collection"], *counts, *extra)
    console = Console()
    console.print(table)
    for r in rows:
        if r["recent"]["batches"]:
            console.print(_recent_line(r["collection"], r["recent"]), highlight=False)
    return 0


def _recent_line(collection: str, recent: dict[str, Any]) -> str:
    """One line on a collection's last done batches: finishing rate, writer seconds per
    batch and the stage that took most of them (:func:`er.pipeline.recent_work`)."""
    n = recent["batches"]
    line = f"{collection}, last {n} done batch{'es' if n != 1 else ''}: "
    if recent["mentions_per_s"] is not None:
        line += f"finished {_rate(recent['mentions_per_s'])} over {_span(recent['span_s'])}, "
    stages, timed = recent["writer_stages_s"], recent["timed_batches"]
    if not stages:  # batches stored without timings (before er recorded them)
        return line + "no stage timings stored"
    top = max(stages, key=stages.__getitem__)
    some = "" if timed == n else f" (of the {timed} with timings)"
    return (
        f"{line}{recent['writer_s_per_batch']:.2f} s of writer time per batch{some}, "
        f"most in {top.removesuffix('_s')} ({stages[top]:.2f} s); --json has every stage"
    )


def _rate(per_second: float) -> str:
    """A finishing rate in the unit that keeps it readable: 375 mentions/s, 4.2 /min."""
    value, unit = per_second, "s"
    if value < 1:
        value, unit = value * 60, "min"
    if value < 1:
        value, unit = value * 60, "h"
    return f"{value:,.0f} mentions/{unit}" if value >= 100 else f"{value:.3g} mentions/{unit}"


def _span(seconds: float) -> str:
    """A time span in seconds, minutes or hours: 4 s, 10 min, 4 h."""
    if seconds < 120:
        return f"{seconds:.3g} s"
    return f"{seconds / 60:.3g} min" if seconds < 7200 else f"{seconds / 3600:.3g} h"


def cmd_export(args: argparse.Namespace) -> int:
    import csv

    from er.pipeline import run_entities

    settings = _settings()
    _database(settings).dispose()
    rows = run_entities(settings, args.collection, as_of=args.as_of)
    out = args.output.open("w", newline="", encoding="utf-8") if args.output else sys.stdout
    try:
        writer = csv.writer(out)
        writer.writerow(("external_id", "entity_id"))
        writer.writerows((ext, "" if ent is None else ent) for ext, ent in rows)
    finally:
        if args.output:
            out.close()
    return 0


# -- er eval / er report / er worker / er beat ------------------------------------------------
HEADLINE_KEYS = ("pairwise_prf_at_cut", "bcubed_at_cut", "muc_at_cut", "ceaf_e_at_cut")


def cmd_eval(args: argparse.Namespace) -> int:
    from er.pipeline import run_evaluation

    settings = _settings()
    _database(settings).dispose()
    with _progress(f"evaluating {args.collection}"):
        out = run_evaluation(settings, args.collection, as_of=args.as_of)
    metrics = out["metrics"]
    if args.json:
        flat = {k: v for k, v in metrics.items() if k not in ("sweep", "false_merges", "splits")}
        doc = {"run_id": out["run_id"], "as_of_seq": out["as_of_seq"], **flat}
        sys.stdout.write(json.dumps({**doc, "report_path": out["report_path"]}) + "\n")
    else:
        _print_run(out["run_id"], out["as_of_seq"], out["report_path"], metrics)
    return 0


def _print_run(run_id: int, as_of: int | None, path: str | None, metrics: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"evaluation run {run_id}, as of batch {as_of}")
    table.add_column("metric")
    table.add_column("P", justify="right")
    table.add_column("R", justify="right")
    table.add_column("F1", justify="right")
    for key in HEADLINE_KEYS:
        table.add_row(key.removesuffix("_at_cut"), *(f"{v:.4f}" for v in metrics[key]))
    table.add_row("CoNLL", "", "", f"{metrics['conll_f1_at_cut']:.4f}")
    console = Console()
    console.print(table)
    console.print(
        f"{metrics['n_entities']} entities ({metrics['n_gold_entities']} in gold) at score "
        f"{metrics['threshold']:.4f}; report: {path}"
    )


def _runs(settings: Any, collection: str | None) -> list[Any]:
    from sqlalchemy.orm import Session

    from er.stores.sql import eval_runs, find_collection

    engine = _database(settings)
    with Session(engine) as session:
        coll_id = None
        if collection is not None:
            coll = find_collection(session, collection)
            if coll is None:
                raise ERError(f"no collection {collection!r}.")
            coll_id = coll.id
        runs = eval_runs(session, coll_id)
        session.expunge_all()
    engine.dispose()
    return runs


def cmd_report(args: argparse.Namespace) -> int:
    settings = _settings()
    runs = _runs(settings, getattr(args, "collection", None))
    if args.what == "list":
        for r in runs:
            f1 = r.metrics.get("pairwise_prf_at_cut", [0, 0, 0])[2]
            sys.stdout.write(
                f"{r.id}\t{r.created_at:%Y-%m-%d %H:%M}\tas of {r.as_of_seq}\t"
                f"pairwise F1 {f1:.4f}\t{r.report_path}\n"
            )
        return 0
    found = [r for r in runs if r.id == args.run]
    if not found:
        raise ERError(f"no evaluation run {args.run}.")
    run = found[0]
    if args.what == "show":
        _print_run(run.id, run.as_of_seq, run.report_path, run.metrics)
        return 0
    import webbrowser

    uri = Path(run.report_path).resolve().as_uri()
    if not webbrowser.open(uri):
        sys.stdout.write(uri + "\n")  # no browser here: the address to open
    return 0


def _celery(*argv: str) -> int:
    """Run Celery on er's app in this process (``er worker``, ``er beat``)."""
    from workers.app import app

    app.start(list(argv))
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from workers.app import CLUSTER_QUEUE

    settings = _settings()
    _broker(settings)
    cmd_init(args)  # the stores' schemas, before the first task
    queues = ["celery", CLUSTER_QUEUE, *(f"er.{c}" for c in args.collection or [])]
    return _celery("worker", "--loglevel", "INFO", "--pool", "solo", "-Q", ",".join(queues))


def _broker(settings: Any) -> str:
    if not settings.broker_url:
        raise ERError(
            "ER_BROKER_URL is not set: a worker needs a broker, e.g. "
            "ER_BROKER_URL=redis://127.0.0.1:6379/0 (er ingest without one runs in process)."
        )
    return str(settings.broker_url)


def cmd_beat(args: argparse.Namespace) -> int:
    settings = _settings()
    _broker(settings)
    schedule = str(settings.data_dir / "celerybeat-schedule")
    return _celery("beat", "--loglevel", "INFO", "--schedule", schedule)


# -- plumbing -------------------------------------------------------------------------------
class _progress:
    """A rich spinner for work without steps (a single fit)."""

    def __init__(self, text: str) -> None:
        from rich.console import Console

        self._status = Console(stderr=True).status(text)

    def __enter__(self) -> None:
        self._status.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._status.__exit__(*exc)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="er", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("cluster", help="cluster X.npy and write the structure as JSON")
    p.add_argument("--algorithm", required=True, choices=ALGORITHMS)
    p.add_argument("--input", required=True, type=Path)
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="rows per partial_fit call (incremental algorithms)",
    )
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument(
        "--neighbors",
        choices=("auto", "exact", "annoy"),
        default="auto",
        help="k-NN graph of the batch algorithms: auto (exact below 5,000 points, then "
        "hnswlib, recall@10 >= 0.95 on hard data), exact (O(n^2 d)) or annoy",
    )
    p.add_argument("--output", required=True, type=Path)
    p.set_defaults(func=cmd_cluster)

    p = sub.add_parser("score", help="metrics of a structure against gold labels")
    p.add_argument("--structure", required=True, type=Path)
    p.add_argument("--labels", required=True, type=Path)
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("init", help="create or upgrade both stores")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("demo", help="FEBRL3 through ingest and MBSCC on the stores")
    p.add_argument("--json", action="store_true", help="one JSON object as the last line")
    p.add_argument("--batch-size", type=int, default=500)
    p.add_argument(
        "--synthetic", action="store_true", help="seeded vectors clustered at once with SCC"
    )
    p.add_argument("--entities", type=int, default=200, help="with --synthetic")
    p.add_argument("--seed", type=int, default=0, help="with --synthetic")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("ingest", help="records in (JSONL or CSV): validate, store, cluster")
    p.add_argument("file", type=Path)
    p.add_argument("--collection", required=True)
    p.add_argument("--id-field", default="id")
    p.add_argument("--gold-field", default=None)
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--format", choices=("jsonl", "csv"), default=None)
    p.add_argument(
        "--config", default=None, help="collection config as JSON or @file (first ingest only)"
    )
    p.add_argument("--wait", action="store_true", help="with a broker: wait until resolved")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds --wait waits")
    p.add_argument("--json", action="store_true", help="one JSON summary as the last line")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser(
        "status", help="batches by status, lag, counts, rejects; rate and stages of recent batches"
    )
    p.add_argument("--collection", default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("export", help="entities of a collection as CSV")
    p.add_argument("what", choices=("entities",))
    p.add_argument("--collection", required=True)
    p.add_argument("--as-of", type=int, default=None)
    p.add_argument("--output", type=Path, default=None)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "query",
        help="lineage queries (schema/queries/*.cypher)",
        description="entity MENTION: the stable entity and its members; history MENTION: "
        "every entity it belonged to and the merges/splits between; explain A B: why two "
        "mentions are together or apart. With --score/--level, entity gives the cluster "
        "node of that cut instead.",
    )
    p.add_argument(
        "what",
        choices=("ancestors", "members", "entity", "history", "explain", "stats", "confidence"),
    )
    p.add_argument("mentions", nargs="*", help="external ids (entity, history, explain)")
    p.add_argument("--collection", required=True)
    p.add_argument("--json", action="store_true", help="one JSON object (entity/history/explain)")
    node = p.add_mutually_exclusive_group()
    node.add_argument("--id", type=int, default=0, help="graph node id")
    node.add_argument("--mention", default=None, help="external id of an ingested record")
    p.add_argument("--entity", type=int, default=None, help="stable entity id (confidence)")
    p.add_argument("--as-of", type=int, default=None)
    p.add_argument("--score", type=float, default=None)
    p.add_argument("--level", type=int, default=None)
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("eval", help="evaluate a collection against its gold labels")
    p.add_argument("--collection", required=True)
    p.add_argument("--as-of", type=int, default=None, help="batch seq (default: newest done)")
    p.add_argument("--json", action="store_true", help="one JSON object as the last line")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("report", help="evaluation reports: list, show, open")
    rsub = p.add_subparsers(dest="what", required=True)
    r = rsub.add_parser("list")
    r.add_argument("--collection", default=None)
    for name in ("show", "open"):
        r = rsub.add_parser(name)
        r.add_argument("run", type=int)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("worker", help="a Celery worker for er's tasks")
    p.add_argument("--collection", action="append", default=[])
    p.set_defaults(func=cmd_worker)
    p = sub.add_parser("beat", help="Celery beat: scheduled evaluations (ER_EVAL_SCHEDULE)")
    p.set_defaults(func=cmd_beat)
    return parser


def _on_sigterm(signum: int, frame: object) -> None:
    # Turn SIGTERM into SystemExit so that cleanup (the embedded server) runs.
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    if not args.verbose:  # per-batch lines would bury the tables and progress bars
        for name in ("er.pipeline", "er.stores"):
            logging.getLogger(name).setLevel(logging.WARNING)
    signal.signal(signal.SIGTERM, _on_sigterm)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except ERError as exc:
        logger.error("%s", exc)
        return 2
    except BrokenPipeError:  # `er export ... | head`: the reader has what it wanted
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - interpreter exit closes it
        return 0


if __name__ == "__main__":
    sys.exit(main())
