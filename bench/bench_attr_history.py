"""Cost of versioned node attributes on FalkorDB: variants of the node upsert.

    python bench/bench_attr_history.py [--nodes 100000] [--repeats 3]

The clusters of bench_stores' binary tree (~N/2 nodes) are created (seq 1), replayed,
rewritten with new sizes and scores (seq 2, every row a change, as a delta sends only
changed nodes) and that batch replayed, by each variant in turn on one embedded
FalkorDB, repeated ``--repeats`` times in rotation so that machine noise hits all:

- ``overwrite``: the statement before attribute history (latest values only);
- ``lists``: er's statement: a newer batch appends the replaced values to parallel
  ``prev_*`` lists (``stamp < $seq`` decides);
- ``lists-compare``: the same, appending only when a value differs (the comparison is
  evaluated once per list item);
- ``version-node``: a ``(:NodeVersion)`` node per replaced version, linked by
  ``[:WAS]``, created by a statement that matches every row before the upsert.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import tempfile
import time
from typing import Any

from bench_stores import tree_delta, update_delta

from er.stores.graph import EmbeddedFalkorDB, FalkorDBStore
from er.stores.graph import _cypher as cy
from er.stores.graph._base import _node_rows

# rows are lists in cy.NODE_ROW order: [id, size, score, level_lo, level_hi]
COMPARE = (
    "n.stamp < $seq AND (n.size <> r[1] OR n.level_lo <> r[3] OR n.level_hi <> r[4] "
    "OR NOT coalesce(n.score = r[2], n.score IS NULL AND r[2] IS NULL))"
)


def variants() -> dict[str, str]:
    lists = cy.upsert_nodes_cypher("Cluster", "rows")
    overwrite = re.sub(r"n\.prev_\w+ = CASE WHEN .*? ELSE n\.prev_\w+ END, ", "", lists)
    assert "prev_" not in overwrite
    version_node = (
        "UNWIND $rows AS r MATCH (n:Node {key: $prefix + toString(r[0])}) WHERE n.stamp < $seq "
        "CREATE (n)-[:WAS]->(:NodeVersion {until: $seq, size: n.size, score: n.score, "
        "level_lo: n.level_lo, level_hi: n.level_hi}) WITH count(*) AS _done "
        + overwrite.replace("UNWIND $rows", "UNWIND $rows_again")
    )
    return {
        "overwrite": overwrite,
        "lists": lists,
        "lists-compare": lists.replace(
            "CASE WHEN n.stamp < $seq THEN", f"CASE WHEN {COMPARE} THEN"
        ),
        "version-node": version_node,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"machine: {platform.node()} {platform.machine()}, python {platform.python_version()}")
    tree = tree_delta(args.nodes)
    created, updated = _node_rows(tree, leaf=False), _node_rows(update_delta(tree), leaf=False)
    steps = {"create": (1, created), "replay": (1, created), "update": (2, updated)}
    steps["update_replay"] = (2, updated)
    times: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp, EmbeddedFalkorDB(tmp) as server:
        db = server.client()
        for rep in range(args.repeats):
            for name, statement in variants().items():
                graph = db.select_graph(f"{name}-{rep}")
                FalkorDBStore(graph).init_schema()
                params: dict[str, Any] = {"prefix": "b#", "collection": "b", "open": cy.OPEN}
                params["algorithm"] = "bench"
                for step, (seq, rows) in steps.items():
                    t = time.perf_counter()
                    graph.query(statement, {**params, "seq": seq, "rows": rows, "rows_again": rows})
                    times.setdefault(name, {}).setdefault(step, []).append(time.perf_counter() - t)
                graph.delete()
    print(f"rows per step: {len(created)} clusters; seconds per repeat, then median")
    for name, by_step in times.items():
        summary = {s: sorted(v)[len(v) // 2] for s, v in by_step.items()}
        print(name, json.dumps({s: [round(x, 2) for x in v] for s, v in by_step.items()}))
        print(name, "median", json.dumps({s: round(x, 2) for s, x in summary.items()}))


if __name__ == "__main__":
    main()
