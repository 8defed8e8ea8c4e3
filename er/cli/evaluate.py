"""``er eval`` and ``er report``: evaluation runs and their reports."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from er.cli._common import _database, _progress, _settings
from er.exceptions import ERError

HEADLINE_KEYS = ("pairwise_prf_at_cut", "bcubed_at_cut", "muc_at_cut", "ceaf_e_at_cut")


def cmd_eval(args: argparse.Namespace) -> int:
    from er.pipeline import run_evaluation

    settings = _settings()
    _database(settings).dispose()
    with _progress(f"evaluating {args.collection}"):
        out = run_evaluation(settings, args.collection, as_of=args.as_of, threshold=args.threshold)
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

    title = f"evaluation run {run_id}" if run_id is not None else "preview (nothing stored)"
    table = Table(title=f"{title}, as of batch {as_of}: {metrics['entities_scored']} entities")
    table.add_column("metric")
    table.add_column("P", justify="right")
    table.add_column("R", justify="right")
    table.add_column("F1", justify="right")
    for key in HEADLINE_KEYS:
        table.add_row(key.removesuffix("_at_cut"), *(f"{v:.4f}" for v in metrics[key]))
    table.add_row("CoNLL", "", "", f"{metrics['conll_f1_at_cut']:.4f}")
    for key in ("pairwise_prf_all_records", "bcubed_all_records"):
        if key in metrics:  # refused records as their own entities
            table.add_row(key.replace("_prf", ""), *(f"{v:.4f}" for v in metrics[key]))
    console = Console()
    console.print(table)
    console.print(
        f"{metrics['n_entities']} entities ({metrics['n_gold_entities']} in gold) at score "
        f"{metrics['threshold']:.4f}; accepted mentions scored above; "
        f"{metrics['refused']} record(s) refused at ingest "
        f"({metrics['refused_with_gold']} with a gold label: the *_all_records rows count "
        f"each as its own entity); report: {path or '(preview: none written)'}"
    )
    if metrics.get("model_agreement"):
        from er.cli.status import agreement_line

        console.print(agreement_line("without gold", metrics["model_agreement"]), highlight=False)


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
