"""``er ingest``: records in (JSONL or CSV), in this process or through the queue."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from er.cli._common import _database, _json_arg, _settings
from er.exceptions import ERError


def cmd_ingest(args: argparse.Namespace) -> int:
    from er.records import read_chunks

    settings = _settings()
    common = {
        "collection": args.collection,
        "id_field": _id_field(settings, args),  # makes the stores' schema too
        "gold_field": args.gold_field,
        "config": _json_arg(args.config, "--config"),
    }
    chunks = read_chunks(args.file, args.batch_size, args.format, common["id_field"], args.encoding)
    if settings.broker_url:
        summary = _ingest_queued(settings, args, common, chunks)
    else:
        summary = _ingest_in_process(settings, args, common, chunks)
    if args.json:
        sys.stdout.write(json.dumps(summary) + "\n")
    return 0


def _id_field(settings: Any, args: argparse.Namespace) -> str:
    """The id field of this ingest, settled before any record is read or queued: an
    existing collection's stored one (another given is an error), or the one given
    (default ``id``) for a new collection, whose name is checked here too. Creates or
    upgrades the schema first (an empty database; --wait reads the batches)."""
    from sqlalchemy.orm import Session

    from er.pipeline.config import check_collection_name
    from er.stores.sql import find_collection, upgrade

    engine = _database(settings)
    try:
        upgrade(engine)
        with Session(engine) as session:
            coll = find_collection(session, args.collection)
            stored = None if coll is None else coll.config.get("id_field")
    finally:
        engine.dispose()
    if coll is None:
        check_collection_name(args.collection)
    if stored is None:
        return str(args.id_field or "id")
    if args.id_field is not None and args.id_field != stored:
        raise ERError(
            f"collection {args.collection!r} takes its ids from field {stored!r}, not "
            f"{args.id_field!r}; leave --id-field out (or pass --id-field {stored})."
        )
    return str(stored)


def _line_count(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for line in f if line.strip())


# Batches ingested before they are clustered in process: one run over several pending
# batches writes batch b's delta to the graph while it steps batch b+1 (er.pipeline.lane._Lane).
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
                _print_types(args.collection, out.get("field_types"), out.get("left_out"))
            run_cluster(settings, args.collection, on_batch=resolved)
    _print_ingest(args.collection, totals, reasons)
    return {"collection": args.collection, **totals}


def _ingest_queued(
    settings: Any, args: argparse.Namespace, common: dict[str, Any], chunks: Any
) -> dict[str, Any]:
    """ER_BROKER_URL set: queue one er.ingest task per batch; --wait for them to resolve."""
    from workers.tasks import ingest

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
    for o in outs:
        _print_types(args.collection, o.get("field_types"), o.get("left_out"))
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


# --wait asks each poll about the lowest WAIT_WINDOW of its batches not yet resolved
# (the writer resolves a collection's batches in seq order), two columns of each: a
# poll's cost stays flat however many batches a bulk load queued. Asking about every
# queued batch as ORM rows cost more with each batch queued, the client's and
# PostgreSQL's CPU taken from the worker (issue #30; bench/HISTORY.md, 2026-11-26).
WAIT_WINDOW = 64
POLL_S = 0.2


def _wait_resolved(settings: Any, collection: str, seqs: set[int], timeout: float) -> None:
    """Return once every batch of ``seqs`` is done or failed (a seq without a batch
    row counts as resolved); ERError after ``timeout`` seconds."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from er.stores.sql import Batch, find_collection

    engine = _database(settings)
    deadline = time.monotonic() + timeout
    pending = sorted(seqs)
    try:
        with Session(engine) as session:
            coll = find_collection(session, collection)
            if coll is None:  # the workers wrote to another database than this one reads
                raise ERError(f"no collection {collection!r}.")
            coll_id = coll.id
        while pending:
            window = pending[:WAIT_WINDOW]
            query = select(Batch.seq, Batch.status).where(
                Batch.collection_id == coll_id, Batch.seq.in_(window)
            )
            with Session(engine) as session:
                status = {seq: st for seq, st in session.execute(query)}
            waiting = [s for s in window if status.get(s, "done") not in ("done", "failed")]
            pending = waiting + pending[WAIT_WINDOW:]
            if waiting and time.monotonic() > deadline:
                raise ERError(f"{collection}: batches not resolved after {timeout:.0f} s.")
            if waiting:
                time.sleep(POLL_S)
    finally:
        engine.dispose()


def _print_types(
    collection: str, types: dict[str, str] | None, left_out: list[str] | None = None
) -> None:
    """A new collection's inferred field types, the fields it leaves out, and how to
    give others."""
    if not types:
        return
    listed = ", ".join(f"{name}={kind}" for name, kind in types.items())
    sys.stderr.write(f"{collection}: new collection, field types inferred: {listed}\n")
    if left_out:
        named = ", ".join(repr(n) if n.strip() else "the unnamed column" for n in left_out)
        sys.stderr.write(
            f"  not compared: {named} (row numbers, each record its own; lists and "
            "objects; no header)\n"
        )
    sys.stderr.write(
        "  (to type a field otherwise, ingest into a new collection with "
        '--config \'{"field_types": {"FIELD": "TYPE"}}\'; types: er ingest --help)\n'
    )


def _print_ingest(collection: str, totals: dict[str, int], reasons: list[str]) -> None:
    for reason in reasons[:10]:
        sys.stderr.write(f"rejected: {reason}\n")
    if len(reasons) > 10:
        sys.stderr.write("... and more; see the rejected_records table\n")
    parts = ", ".join(f"{v} {k}" for k, v in totals.items())
    sys.stderr.write(f"{collection}: {parts}\n")
