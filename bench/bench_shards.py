"""Sharding a collection (DESIGN §4, "Scale-out"): what a shard key costs in quality
and buys in work per mention, on the synthetic people, before the pipeline shards.

    python bench/bench_shards.py --n 100000 --batch 1000 --shards 1 4 8 16 --keys dob-year
    python bench/bench_shards.py --data dataset3 --batch 500 --shards 1 4 8 16 \
        --keys dob-year postcode surname-initial dob-year+postcode+surname-initial

Each shard keeps its own exact k-NN index and MBSCC core, as one writer per shard
would. The records arrive in the pipeline's batches; ``split`` hands each batch's
records to their shards at once (latency as unsharded), ``fill`` lets a shard step
once it holds a full batch of its own (fewer, larger steps; a shard's records wait
longer). Entities are each shard's cut at the pipeline's default threshold. A key
may name several fields ("dob-year+surname-initial"): a record then sits in each
field's shard, and records that share an entity in any shard are one entity
(connected components). A gold pair that shares no shard is found only through a
third record; the key's pair completeness is the share that shares one.

Reported per run: the exact index's and MBSCC's seconds (one process, the
featurizer config inferred from the first batch as the pipeline does), the graph
rows the deltas would write per mention (nodes upserted and retired, parent edges
added and retired, the NEAR edges), pairwise and B-cubed F1 against the gold.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

sys.path.insert(0, str(Path(__file__).resolve().parent))

from people import febrl_set, synthetic_people

from er.ann import batch_neighbors, make_index
from er.cluster import MBSCC
from er.evaluation import bcubed, cut_at_score, pairwise_prf
from er.featurize import featurize, infer_config
from er.pipeline import DEFAULT_ENTITY_CUT, NEAR_K

KEYS: dict[str, Callable[[dict[str, str]], str]] = {
    "dob-year": lambda r: r.get("date_of_birth", "")[:4],
    "surname-initial": lambda r: r.get("surname", "")[:1].lower(),
    "postcode": lambda r: r.get("postcode", ""),
}


FEBRL = ("dataset1", "dataset2", "dataset3", "dataset4")


def _records(data: str, n: int, seed: int) -> list[dict[str, str]]:
    """The synthetic people, or a FEBRL set in file order (dataset4: 4a then 4b)."""
    return synthetic_people(n, seed=seed) if data == "people" else febrl_set(data)


def shard_of(records: list[dict[str, str]], key: str, shards: int) -> NDArray[np.int64]:
    """(n, m) shards of each record, one column per field of ``key`` ("a+b": m = 2).

    CRC-32 of the field's value, modulo ``shards``; one shard when ``shards`` is 1.
    """
    fields = key.split("+")
    if shards == 1:
        return np.zeros((len(records), 1), np.int64)
    return np.array(
        [[zlib.crc32(KEYS[f](r).encode()) % shards for f in fields] for r in records],
        np.int64,
    ).reshape(len(records), len(fields))


def pair_completeness(gold: NDArray[np.int64], shard: NDArray[np.int64]) -> float:
    """Share of the gold's co-referent pairs whose two records share a shard.

    ``shard`` is (n, m) as :func:`shard_of` gives; a pair is kept when some column
    puts both records in one shard (a record sits in each of its columns' shards).
    """
    order = np.argsort(gold, kind="stable")
    starts = np.flatnonzero(np.r_[True, gold[order][1:] != gold[order][:-1]])
    kept = total = 0
    for members in np.split(order, starts[1:]):  # one gold entity
        if members.size < 2:
            continue
        a, b = np.triu_indices(members.size, 1)
        both = (shard[members[a]] == shard[members[b]]).any(axis=1)
        kept, total = kept + int(both.sum()), total + a.size
    return kept / max(total, 1)


def joined_labels(
    rows: list[NDArray[np.int64]], labels: list[NDArray[np.int64]], n: int
) -> NDArray[np.int64]:
    """(n,) entity per record: records that share an entity in any shard are one.

    ``rows[s]`` and ``labels[s]`` are shard ``s``'s records and their entities in it;
    the entities are the connected components of the record-entity graph.
    """
    offsets = np.cumsum([0] + [int(lab.max()) + 1 for lab in labels])
    r = np.concatenate(rows)
    c = n + np.concatenate([lab + off for lab, off in zip(labels, offsets, strict=False)])
    size = n + int(offsets[-1])
    graph = coo_matrix((np.ones(r.size), (r, c)), shape=(size, size))
    return connected_components(graph, directed=False)[1][:n].astype(np.int64)


@dataclass
class Shard:
    """One writer's state: its index, its core, the global rows it holds."""

    dim: int
    rows: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    core: MBSCC = field(default_factory=MBSCC)

    def __post_init__(self) -> None:
        self.index = make_index("exact", dim=self.dim)


@dataclass
class Tally:
    index_s: float = 0.0
    core_s: float = 0.0
    steps: int = 0
    graph_rows: int = 0
    step_s: list[float] = field(default_factory=list)


def _step(shard: Shard, X: NDArray[np.float32], tally: Tally) -> None:
    """One writer's batch: search and insert (exact index), then the MBSCC step."""
    rows = np.array(shard.pending, np.int64)
    shard.pending.clear()
    started = time.perf_counter()
    k = max(shard.core.k, NEAR_K)
    idx, sim = batch_neighbors(shard.index, X[rows], k)
    searched = time.perf_counter()
    shard.core.partial_fit(X[rows], neighbors=(idx, sim))
    done = time.perf_counter()
    d = shard.core.delta_
    tally.graph_rows += (
        len(d.node_id) + len(d.retired) + len(d.edges_added) + len(d.edges_retired)
    ) + NEAR_K * len(rows)
    tally.index_s += searched - started
    tally.core_s += done - searched
    tally.steps += 1
    tally.step_s.append(done - started)
    shard.rows.extend(rows.tolist())


def _batches(n: int, batch: int) -> Iterator[range]:
    for start in range(0, n, batch):
        yield range(start, min(start + batch, n))


def run(
    X: NDArray[np.float32],
    shard: NDArray[np.int64],
    shards: int,
    batch: int,
    mode: str,
) -> tuple[Tally, NDArray[np.int64]]:
    """Stream ``X`` through ``shards`` writers; the tally and each row's entity.

    Returns
    -------
    tally : Tally
    label : ndarray of int64, shape (n,)
        Entity of each row, joined across shards (:func:`joined_labels`).
    """
    writers = [Shard(X.shape[1]) for _ in range(shards)]
    tally = Tally()
    for rows in _batches(X.shape[0], batch):
        for r in rows:
            for w in np.unique(shard[r]):  # each of its keys' shards, once
                writers[w].pending.append(r)
        for w in writers:
            if w.pending and (mode == "split" or len(w.pending) >= batch):
                _step(w, X, tally)
    for w in writers:  # the tail of "fill"
        if w.pending:
            _step(w, X, tally)
    held = [w for w in writers if w.rows]
    label = joined_labels(
        [np.array(w.rows, np.int64) for w in held],
        [cut_at_score(w.core.hierarchy_, DEFAULT_ENTITY_CUT) for w in held],
        X.shape[0],
    )
    return tally, label


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="people", choices=["people", *FEBRL])
    ap.add_argument("--n", type=int, default=100_000, help="synthetic people only")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shards", type=int, nargs="+", default=[1, 4, 8, 16])
    ap.add_argument(
        "--keys",
        nargs="+",
        default=["dob-year"],
        help=f"a field of {sorted(KEYS)}, or several joined by + (a record in each's shard)",
    )
    ap.add_argument("--modes", nargs="+", default=["split", "fill"], choices=["split", "fill"])
    args = ap.parse_args()
    for key in args.keys:
        if not set(key.split("+")) <= set(KEYS):
            ap.error(f"--keys: {key!r} names no field of {sorted(KEYS)}")

    records = _records(args.data, args.n, args.seed)
    args.n = len(records)
    cfg = infer_config(records[: args.batch], id_field="rec_id", gold_field="entity")
    X = featurize(records, cfg)
    gold = np.unique([r["entity"] for r in records], return_inverse=True)[1].astype(np.int64)
    machine = (
        f"{platform.machine()}, {platform.os.cpu_count()} cpus, Python {platform.python_version()}"
    )
    plans = [("none", 1, "split")] if 1 in args.shards else []
    plans += [(k, s, m) for k in args.keys for s in args.shards if s > 1 for m in args.modes]
    for key, shards, mode in plans:
        shard = shard_of(records, key, shards)
        copies = np.concatenate([np.unique(row) for row in shard])  # a record once per shard
        started = time.perf_counter()
        tally, label = run(X, shard, shards, args.batch, mode)
        wall = time.perf_counter() - started
        row = {
            "data": args.data,
            "n": args.n,
            "batch": args.batch,
            "key": key,
            "shards": shards,
            "mode": mode,
            "pair_completeness": round(pair_completeness(gold, shard), 4),
            "largest_shard_share": round(float(np.bincount(copies).max()) / args.n, 4),
            "copies_per_record": round(copies.size / args.n, 3),
            "index_s": round(tally.index_s, 1),
            "core_s": round(tally.core_s, 1),
            "wall_s": round(wall, 1),
            "ms_per_mention": round(1000 * (tally.index_s + tally.core_s) / args.n, 3),
            "steps": tally.steps,
            "step_p95_s": round(float(np.percentile(tally.step_s, 95)), 3),
            "graph_rows_per_mention": round(tally.graph_rows / args.n, 2),
            "pairwise_f1": round(pairwise_prf(gold, label)[2], 4),
            "bcubed_f1": round(bcubed(gold, label)[2], 4),
            "machine": machine,
            "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
