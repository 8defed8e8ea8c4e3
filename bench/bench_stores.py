"""Store throughput: graph delta apply and relational mention inserts.

    python bench/bench_stores.py [--nodes 100000] [--pg postgresql://postgres@127.0.0.1/postgres]
                                 [--graph-only]

Graph: one ClusteringDelta of a binary tree with ~N nodes and ~N edges applied by
FalkorDBStore (one atomic query, MERGE, idempotent) next to the floor a raw client
reaches on the same server with plain CREATE statements (not idempotent). Then a
second batch rewrites every cluster's size and score (what GRINCH rotations and MBSCC
re-parenting do to ancestors; it exercises the attribute history) and is replayed, and
the whole structure is read now and as of batch 1.
Relational: upsert_mentions (INSERT .. ON CONFLICT DO NOTHING RETURNING) next to
PostgreSQL COPY into the same table, the fastest bulk path.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
import uuid
from typing import Any

import numpy as np
import psycopg
from sqlalchemy.orm import Session

from er.delta import ClusteringDelta
from er.stores.graph import EmbeddedFalkorDB, FalkorDBStore
from er.stores.sql import get_or_create_collection, make_engine, upgrade, upsert_mentions


def tree_delta(n_nodes: int, seed: int = 0) -> ClusteringDelta:
    """A random binary tree with ~n_nodes nodes (n_nodes/2 leaves) as one delta."""
    rng = np.random.default_rng(seed)
    n = n_nodes // 2 + 1
    current = list(range(n))
    edges, nxt = [], n
    while len(current) > 1:
        i, j = sorted(rng.choice(len(current), 2, replace=False))
        a, b = current.pop(j), current.pop(i)
        edges += [(a, nxt), (b, nxt)]
        current.append(nxt)
        nxt += 1
    m = nxt
    return ClusteringDelta(
        node_id=np.arange(m),
        is_leaf=np.arange(m) < n,
        size=np.ones(m),
        score=np.r_[np.full(n, np.nan), rng.random(m - n)],
        level_lo=np.zeros(m),
        level_hi=np.zeros(m),
        edges_added=edges,
        algorithm="bench",
    )


def update_delta(delta: ClusteringDelta, seed: int = 1) -> ClusteringDelta:
    """Every cluster of ``delta`` again, with a new score and size (no edge changes)."""
    rng = np.random.default_rng(seed)
    keep = ~delta.is_leaf
    return ClusteringDelta(
        node_id=delta.node_id[keep],
        is_leaf=delta.is_leaf[keep],
        size=delta.size[keep] + 1,
        score=rng.random(int(keep.sum())),
        level_lo=delta.level_lo[keep],
        level_hi=delta.level_hi[keep],
        algorithm="bench",
    )


def _timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def bench_graph(n_nodes: int) -> dict[str, float]:
    delta = tree_delta(n_nodes)
    with tempfile.TemporaryDirectory() as tmp, EmbeddedFalkorDB(tmp) as server:
        db = server.client()
        store = FalkorDBStore(db.select_graph("bench"))
        store.init_schema()
        t = time.perf_counter()
        store.apply_delta("bench", delta, 1)
        ours = time.perf_counter() - t
        t = time.perf_counter()
        store.apply_delta("bench", delta, 1)  # replay: must change nothing
        replay = time.perf_counter() - t
        assert store.stats("bench")["edges"] == delta.edges_added.shape[0]
        update = update_delta(delta)
        updated = _timed(lambda: store.apply_delta("bench", update, 2))
        update_replay = _timed(lambda: store.apply_delta("bench", update, 2))
        read_now = _timed(lambda: store.structure("bench"))
        read_then = _timed(lambda: store.structure("bench", as_of=1))
        raw = db.select_graph("raw")
        raw.query("CREATE INDEX FOR (n:Node) ON (n.id)")
        nodes = [{"id": int(i)} for i in delta.node_id]
        edges = [{"c": int(c), "p": int(p)} for c, p in delta.edges_added]
        t = time.perf_counter()
        raw.query("UNWIND $rows AS r CREATE (:Node {id: r.id})", {"rows": nodes})
        raw.query(
            "UNWIND $rows AS r MATCH (a:Node {id: r.c}), (b:Node {id: r.p}) "
            "CREATE (a)-[:PARENT]->(b)",
            {"rows": edges},
        )
        floor = time.perf_counter() - t
    elements = delta.node_id.shape[0] + delta.edges_added.shape[0]
    return {
        "elements": elements,
        "er_s": ours,
        "er_per_s": elements / ours,
        "replay_s": replay,
        "update_nodes": update.node_id.shape[0],
        "update_s": updated,
        "update_replay_s": update_replay,
        "read_now_s": read_now,
        "read_as_of_1_s": read_then,
        "raw_create_s": floor,
        "raw_per_s": elements / floor,
        "ratio_er_to_raw": ours / floor,
    }


def bench_pg(admin_url: str, n_rows: int) -> dict[str, float]:
    name = f"er_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = admin_url.rsplit("/", 1)[0] + f"/{name}"
    engine = make_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        upgrade(engine)
        rows = [
            {"external_id": f"r{i}", "payload": {"name": f"person {i}", "city": "x"}}
            for i in range(n_rows)
        ]
        with Session(engine) as s, s.begin():
            cid = get_or_create_collection(s, "bench").id
            cid2 = get_or_create_collection(s, "copy").id
        t = time.perf_counter()
        with Session(engine) as s, s.begin():
            upsert_mentions(s, cid, 1, rows)
        ours = time.perf_counter() - t
        t = time.perf_counter()
        with (
            psycopg.connect(url) as conn,
            conn.cursor() as cur,
            cur.copy(
                "COPY mentions (collection_id, external_id, payload, batch_seq) FROM STDIN"
            ) as copy,
        ):
            for r in rows:
                copy.write_row((cid2, r["external_id"], json.dumps(r["payload"]), 1))
        floor = time.perf_counter() - t
    finally:
        engine.dispose()
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    return {
        "rows": n_rows,
        "er_s": ours,
        "er_per_s": n_rows / ours,
        "copy_s": floor,
        "copy_per_s": n_rows / floor,
        "ratio_er_to_copy": ours / floor,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--graph-only", action="store_true", help="skip the PostgreSQL part")
    args = ap.parse_args()
    print(f"machine: {platform.node()} {platform.machine()}, python {platform.python_version()}")
    print("graph:", json.dumps({k: round(v, 3) for k, v in bench_graph(args.nodes).items()}))
    if args.graph_only:
        return
    print(
        "postgres:", json.dumps({k: round(v, 3) for k, v in bench_pg(args.pg, args.rows).items()})
    )


if __name__ == "__main__":
    main()
