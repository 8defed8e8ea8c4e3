"""The `er` command.

er init                          create or upgrade the relational and graph stores
er demo                          the main job on embedded defaults (no services)
er ingest FILE --collection C    records in (JSONL or CSV), entities out
er status / er export entities   batches, lag, workers; entity of every mention (CSV)
er retry / er rejects            failed work taken again; refused records listed
er cluster ...                   run a clustering core on X.npy, write S.json
er score ...                     metrics of S.json against gold labels (JSON)
er query ...                     canned lineage queries against the graph store
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from er.cli.cluster import ALGORITHMS, cmd_cluster, cmd_score
from er.cli.cut import cmd_cut
from er.cli.evaluate import cmd_eval, cmd_report
from er.cli.ingest import cmd_ingest
from er.cli.operations import cmd_rejects, cmd_retry
from er.cli.query import cmd_query
from er.cli.service import cmd_beat, cmd_demo, cmd_init, cmd_worker
from er.cli.status import cmd_export, cmd_status
from er.cli.train import cmd_model, cmd_train
from er.exceptions import ERError, missing_tables
from er.featurize._types import FIELD_TYPES

logger = logging.getLogger("er")


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
    p.add_argument(
        "--id-field",
        default=None,
        help="field holding each record's id (a new collection: default id; later "
        "ingests: the collection's own)",
    )
    p.add_argument("--gold-field", default=None)
    p.add_argument("--batch-size", type=int, default=1000, help="records per batch (1000)")
    p.add_argument("--format", choices=("jsonl", "csv", "tsv"), default=None)
    p.add_argument(
        "--encoding",
        default=None,
        help="a CSV file's encoding (UTF-8, else Windows-1252 when it holds no UTF-8)",
    )
    p.add_argument(
        "--config",
        default=None,
        help="collection config as JSON or @file (first ingest only); e.g. "
        '\'{"field_types": {"surname": "person_name"}}\' with types ' + ", ".join(FIELD_TYPES),
    )
    p.add_argument("--wait", action="store_true", help="with a broker: wait until resolved")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds --wait waits")
    p.add_argument("--json", action="store_true", help="one JSON summary as the last line")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser(
        "status",
        help="batches by status, lag, counts, rejects; rate and stages of recent batches; "
        "workers, stranded batches, failed tasks",
    )
    p.add_argument("--collection", default=None)
    p.add_argument(
        "--no-model-check",
        action="store_true",
        help="leave out the entities-against-model shares (they open the graph)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser(
        "retry",
        help="take a collection's failed batches and tasks, and its stranded batches, again",
        description="Failed batches go back to pending (a batch that later batches have "
        "passed is queued under a new seq), batches stranded on a worker that is gone and "
        "failed ingest tasks are queued again; the writer takes them (through the broker, "
        "or here without one). Mend the cause first: a batch failing again is failed again.",
    )
    p.add_argument("--collection", required=True)
    p.add_argument("--batch", type=int, default=None, metavar="SEQ", help="only this batch")
    p.set_defaults(func=cmd_retry)

    p = sub.add_parser("rejects", help="a collection's rejected records: id, field, reason")
    p.add_argument("--collection", required=True)
    p.add_argument("--format", choices=("csv", "json"), default="csv")
    p.set_defaults(func=cmd_rejects)

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
    p.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="preview the hierarchy cut at this score instead of the stored entities; "
        "stores nothing (change the cut with er cut)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object as the last line")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser(
        "cut", help="change a collection's entity cut (recorded; merges and splits follow)"
    )
    p.add_argument("--collection", required=True)
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--threshold", type=float, help="the new cut (a score)")
    how.add_argument(
        "--gold",
        action="store_true",
        help="the cut at which the gold-labelled mentions score their best pairwise F1 "
        "(development data: whole entities labelled, the gold field named at the first "
        "ingest with --gold-field)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(func=cmd_cut)

    p = sub.add_parser("train", help="train a new version of a collection's pair model")
    p.add_argument("--collection", required=True)
    p.add_argument("--gold", action="store_true", help="count from the gold labels, not EM")
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("model", help="a collection's field types and pair-model weights")
    p.add_argument("--collection", required=True)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_model)

    p = sub.add_parser("report", help="evaluation reports: list, show, open")
    rsub = p.add_subparsers(dest="what", required=True)
    r = rsub.add_parser("list")
    r.add_argument("--collection", default=None)
    for name in ("show", "open"):
        r = rsub.add_parser(name)
        r.add_argument("run", type=int)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("worker", help="a Celery worker for er's tasks")
    p.add_argument(
        "--collection",
        action="append",
        default=[],
        help="also consume the queue er.C (repeatable): for routing one collection's "
        "tasks to this worker yourself; er queues nothing there",
    )
    p.add_argument(
        "--ingesters",
        type=int,
        default=1,
        help="processes beside the writer that store incoming batches (default 1; "
        "0: the writer's process takes them first, between its batches)",
    )
    p.add_argument(
        "--ingest-only",
        action="store_true",
        help="take only the ingest queue (what --ingesters starts; more of them scale ingest)",
    )
    p.add_argument("--parent", type=int, default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_worker)
    p = sub.add_parser("beat", help="Celery beat: scheduled evaluations (ER_EVAL_SCHEDULE)")
    p.set_defaults(func=cmd_beat)
    return parser


def _on_sigterm(signum: int, frame: object) -> None:
    # Turn SIGTERM into SystemExit so that cleanup (the embedded server) runs.
    raise SystemExit(128 + signum)


def _is_database_error(exc: BaseException) -> bool:
    """SQLAlchemy's database errors (imported only when one is raised: the core
    commands never load SQLAlchemy)."""
    if "sqlalchemy" not in sys.modules:
        return False
    from sqlalchemy.exc import DBAPIError

    return isinstance(exc, DBAPIError)


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
        logger.error("%s", missing_tables(exc) or exc)
        return 2
    except BrokenPipeError:  # `er export ... | head`: the reader has what it wanted
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - interpreter exit closes it
        return 0
    except Exception as exc:  # a read before any ingest: the tables are not made yet
        line = missing_tables(exc) if _is_database_error(exc) else None
        if line is None:
            raise
        logger.error("%s", line)
        return 2
