"""Where a batch's graph write goes: each statement of the delta timed on its own.

Runs the product pipeline in process (as ``bench/bench_writer.py``: PostgreSQL, an
embedded FalkorDB, MBSCC, the exact index) on synthetic person records in batches,
but applies each batch's write one statement at a time instead of as one chained
query, and prints, per statement, the mean seconds and rows over the last ``--width``
batches (a batch whose write has no rows for a statement counts 0 for it) and the
microseconds per row. The statements are the product's own; only
their chaining differs, so a write measured here is not atomic (a measurement
harness, never a way to run er).

    python bench/bench_graph_parts.py --n 40000 --batch 1000 --width 5 [--at 10000 40000]

``--at``: the statements of the ``--width`` batches ending at each of these sizes (by
default the last ones), one set of rows per size.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_entities import run_pipeline
from people import synthetic_people


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=40_000)
    ap.add_argument("--batch", type=int, default=1_000)
    ap.add_argument("--width", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--at", type=int, nargs="+", default=None, help="sizes to report at")
    args = ap.parse_args()
    from er.stores.graph import _falkordb

    writes: list[dict[str, tuple[float, int]]] = []  # per batch: statement -> (s, rows)

    def one_by_one(self: Any, parts: Sequence[Any], params: dict[str, Any]) -> None:
        spent = {}
        for part in parts:  # a statement without rows is left out of the write
            started = time.perf_counter()
            self._graph.query(part.cypher, {**params, part.rows_param: part.rows})
            spent[part.rows_param] = (time.perf_counter() - started, len(part.rows))
        writes.append(spent)

    _falkordb.FalkorDBStore._write = one_by_one  # type: ignore[method-assign]
    reports = run_pipeline(synthetic_people(args.n, seed=args.seed), args.batch, "graph parts")
    command = " ".join(["python bench/bench_graph_parts.py", *sys.argv[1:]])
    for at in args.at or [args.n]:
        end = -(-at // args.batch)  # batches up to this size
        _report(command, at, reports[end - args.width : end], writes[end - args.width : end])


def _report(
    command: str,
    at: int,
    reports: list[dict[str, Any]],
    last: list[dict[str, tuple[float, int]]],
) -> None:
    """One row for the write as a whole, then one per statement, heaviest first."""
    graph_s = [r["timings"].get("graph_s", 0.0) for r in reports]
    print(
        json.dumps(
            {
                "command": command,
                "machine": f"{platform.machine()}, Python {platform.python_version()}",
                "resolved": at,
                "graph_s_mean": round(sum(graph_s) / len(graph_s), 3),
            }
        )
    )
    seconds: dict[str, float] = defaultdict(float)
    rows: dict[str, int] = defaultdict(int)
    for spent in last:  # a statement missing from a batch's write: 0 rows
        for name, (s, r) in spent.items():
            seconds[name] += s
            rows[name] += r
    for name in sorted(seconds, key=lambda k: -seconds[k]):
        print(
            json.dumps(
                {
                    "resolved": at,
                    "statement": name,
                    "seconds": round(seconds[name] / len(last), 4),
                    "rows": round(rows[name] / len(last)),
                    "us_per_row": round(1e6 * seconds[name] / max(rows[name], 1), 1),
                }
            )
        )


if __name__ == "__main__":
    main()
