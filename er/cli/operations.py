"""``er retry`` and ``er rejects``: taking failed work again, and listing refused records."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from er.cli._common import _database, _settings


def cmd_retry(args: argparse.Namespace) -> int:
    """Failed batches back to pending, stranded batches and failed tasks queued again:
    to the workers through the broker, or run here without one. Prints a line for
    each; exit 1 if a batch run here fails again."""
    from er.pipeline import run_retry, run_tasks_retried

    settings = _settings()
    _database(settings).dispose()
    plan = run_retry(settings, args.collection, args.batch)
    for line in _plan_lines(plan):
        _say(line)
    name, tasks = plan["collection"], plan["tasks"]
    ingests = [t for t in tasks if t["task"] == "er.ingest"]
    if settings.broker_url:
        _queue(name, ingests)
        run_tasks_retried(settings, [t["id"] for t in tasks])
        return 0
    return _in_process(settings, name, ingests, [t["id"] for t in tasks])


def _plan_lines(plan: dict[str, Any]) -> list[str]:
    """What ``er retry`` takes again, a line per failed batch, per worker's stranded
    batches and per failed task."""
    name, lines = plan["collection"], []
    for b in plan["batches"]:
        moved = ""
        if b["now"] != b["batch_seq"]:
            moved = f" as batch {b['now']} (batches after it were resolved)"
        lines.append(
            f"{name}: batch {b['batch_seq']} queued again{moved}; it failed with {b['error']}"
        )
    by_why: dict[str, list[int]] = {}
    for s in plan["stranded"]:
        by_why.setdefault(s["why"], []).append(s["batch_seq"])
    for why, seqs in by_why.items():
        some, them = ("batches", "them") if len(seqs) > 1 else ("batch", "it")
        listed = ", ".join(map(str, seqs))
        lines.append(f"{name}: {some} {listed} stranded ({why}); the writer takes {them} again")
    for t in plan["tasks"]:
        again = "queued again" if t["task"] == "er.ingest" else "replaced by the writer's run"
        lines.append(
            f"{name}: task {t['task_id']} ({t['task']}) {again}; it failed with {t['reason']}"
        )
    return lines


def _queue(collection: str, ingests: list[dict[str, Any]]) -> None:
    """The failed ingest tasks and one writer's run of the collection, to the broker."""
    from workers.app import CLUSTER_QUEUE
    from workers.tasks import cluster, ingest

    for t in ingests:  # each queues the writer's run itself once stored
        ingest.apply_async(kwargs=t["kwargs"])
    cluster.apply_async(kwargs={"collection": collection}, queue=CLUSTER_QUEUE)


def _in_process(
    settings: Any, collection: str, ingests: list[dict[str, Any]], ids: list[int]
) -> int:
    """No broker: the failed ingests and the writer's run here, in this process."""
    from er.pipeline import run_cluster, run_ingest, run_tasks_retried

    for t in ingests:
        run_ingest(settings, **t["kwargs"])
    if ids:
        run_tasks_retried(settings, ids)
    failed = 0
    for report in run_cluster(settings, collection):
        if "error" in report:
            failed += 1
            _say(f"{collection}: batch {report['batch_seq']} failed again with {report['error']}")
        else:
            _say(f"{collection}: batch {report['batch_seq']} done")
    return 1 if failed else 0


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")


def cmd_rejects(args: argparse.Namespace) -> int:
    """A collection's rejected records: external id, the field named, the reason."""
    from er.pipeline import run_rejects

    settings = _settings()
    _database(settings).dispose()
    rows = run_rejects(settings, args.collection)
    if args.format == "json":
        sys.stdout.write(json.dumps(rows, ensure_ascii=False) + "\n")
        return 0
    import csv

    writer = csv.writer(sys.stdout)
    writer.writerow(("external_id", "field", "reason"))
    writer.writerows(
        ("" if r["external_id"] is None else r["external_id"], r["field"] or "", r["reason"])
        for r in rows
    )
    return 0
