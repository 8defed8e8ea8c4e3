"""``er status`` and ``er export entities``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from er.cli._common import _database, _settings


def cmd_status(args: argparse.Namespace) -> int:
    from er.pipeline import run_status, run_workers

    settings = _settings()
    _database(settings).dispose()
    rows = run_status(settings, args.collection, agreement=not args.no_model_check)
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
    workers = rows[0]["workers"] if rows else run_workers(settings)
    if workers:
        console.print(_workers_table(workers))
    for r in rows:
        for line in problem_lines(r):
            console.print(line, highlight=False)
        if r["recent"]["batches"]:
            console.print(_recent_line(r["collection"], r["recent"]), highlight=False)
        if r.get("values"):
            console.print(_values_line(r["collection"], r["values"]), highlight=False)
        if r.get("model_agreement"):
            console.print(agreement_line(r["collection"], r["model_agreement"]), highlight=False)
    return 0


def _workers_table(workers: list[dict[str, Any]]) -> Any:
    """The workers seen in the last hour: state, last beat, last task."""
    from rich.table import Table

    table = Table(title="workers")
    for name in ("worker", "pid", "host", "queues", "state", "last seen", "last task"):
        table.add_column(name, justify="right" if name in ("pid", "last seen") else "left")
    for w in workers:
        table.add_row(
            w["name"],
            str(w["pid"]),
            w["host"],
            ",".join(w["queues"]),
            w["state"],
            f"{_span(w['silent_s'])} ago",
            w["last_task"] or "",
        )
    return table


def problem_lines(row: dict[str, Any]) -> list[str]:
    """What went wrong in a collection, a line each: batches stranded on a worker that
    is gone (by worker), the last failed batch, the failed tasks; each says how to
    take them again."""
    name, lines = row["collection"], []
    retry = f"`er retry --collection {name}` queues"
    by_why: dict[str, list[int]] = {}
    for s in row["stranded"]:
        by_why.setdefault(s["why"], []).append(s["batch_seq"])
    for why, seqs in by_why.items():
        them = "it" if len(seqs) == 1 else "them"
        lines.append(
            f"{name}, stranded: {_batches(seqs)} marked running, but {why}. {retry} {them} again."
        )
    failed = row["batches"].get("failed", 0)
    if failed and row["last_failed"] is not None:
        last = row["last_failed"]
        lines.append(
            f"{name}, failed: {failed} batch{'es' if failed != 1 else ''}; the last, batch "
            f"{last['batch_seq']}: {_sentence(last['error'])} Mend the cause, then {retry} "
            f"{'it' if failed == 1 else 'them'} again."
        )
    tasks = row["failed_tasks"]
    if tasks["count"]:
        last, n = tasks["last"], tasks["count"]
        at = (last["at"] or "")[:19].replace("T", " ")
        lines.append(
            f"{name}, failed in a worker: {n} task{'s' if n != 1 else ''}; the last, "
            f"{last['task']} at {at} UTC: {_sentence(last['reason'])} Mend the cause, then "
            f"{retry} {'it' if n == 1 else 'them'} again."
        )
    return lines


def _sentence(reason: str | None) -> str:
    """A stored reason as a sentence (one full stop)."""
    return (reason or "no reason stored").rstrip(". ") + "."


def _batches(seqs: list[int]) -> str:
    return f"batch {seqs[0]}" if len(seqs) == 1 else "batches " + ", ".join(map(str, seqs))


def agreement_line(collection: str, a: dict[str, Any]) -> str:
    """The gold-free signal in words (:func:`er.pipeline.agreement.model_agreement`)."""

    def share(value: float | None, of: int, what: str) -> str:
        if value is None:
            return f"no {what}"
        return f"{value:.1%} of {of:,} {what}"

    cut = a["cut"]
    inside = share(a["inside_improbable"], a["inside_pairs"], "pairs inside entities")
    across = share(a["across_probable"], a["across_pairs"], "candidate pairs across entities")
    return (
        f"{collection}, entities against the pair model (version {a['model_version']}, "
        f"scored at {a['population']:,} mentions): {inside} score under {cut:g}; "
        f"{across} score {cut:g} or more" + (" (samples)" if a["sampled"] else "")
    )


def _values_line(collection: str, values: dict[str, dict[str, int]]) -> str:
    """Field values resolved without them: unreadable as their type, or cut to length."""
    parts = []
    for kind, what in (("unreadable", "not readable as their type"), ("truncated", "cut")):
        counts = values.get(kind, {})
        if counts:
            fields = ", ".join(f"{name} {n:,}" for name, n in sorted(counts.items()))
            parts.append(f"{what}: {fields}")
    return f"{collection}, values resolved without (records kept): " + "; ".join(parts)


def _recent_line(collection: str, recent: dict[str, Any]) -> str:
    """One line on a collection's last done batches: finishing rate, writer seconds per
    batch and the stage that took most of them (:func:`er.pipeline.recent_work`)."""
    n = recent["batches"]
    line = f"{collection}, last {n} done batch{'es' if n != 1 else ''}: "
    if recent["mentions_per_s"] is not None:
        line += f"finished {_rate(recent['mentions_per_s'])} over {_span(recent['span_s'])}, "
    if recent.get("busy_mentions_per_s") is not None:
        line += f"{_rate(recent['busy_mentions_per_s'])} while the writer worked, "
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
