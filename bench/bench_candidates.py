"""Candidate generation: the blocking keys the writer uses beside exact search.

Issue #30 asks for a candidate search whose cost per record does not grow with the
collection. This streams people through :class:`er.ann.KeyIndex` exactly as the
writer does (batches of 1,000: add the batch's keys, read each record's candidates
among all records so far, re-score them by the vectors' cosine, keep 10) and, at each
size of ``--at``, compares the last ``--queries`` records' lists with the peer, exact
search among the records the writer held when it searched (what collections made
with ``"candidates": "exact"`` do):

- records: ``people_real.py`` people at the test seed, normalised by their inferred
  field types and featurized as a pair-model collection does (``er.pipeline.config``);
- recall@10: the share of exact search's 10 that the keys' 10 hold;
- matches: true matches (gold entity) among the 10 of each; "kept": the share of exact
  search's matches the keys' lists hold too;
- seconds per batch of the keys (hash, add and merge, read, re-score), mean of the 10
  batches before each size, against exact search's seconds for 1,000 of the queries.

    python -m bench candidates --n 1000000 --at 10000 100000 1000000
"""

from __future__ import annotations

import argparse
import platform
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rows import emit
from people_real import TEST_SEED, real_people

BATCH = 1000


def exact_top(
    X: NDArray[np.float32], queries: NDArray[np.int64], n: int
) -> tuple[NDArray[np.int64], float]:
    """(q, 10) the 10 highest cosines of each query among rows ``0 .. n-1`` but
    itself; seconds."""
    started = time.perf_counter()
    out = np.empty((queries.size, 10), np.int64)
    for s in range(0, queries.size, 500):
        block = queries[s : s + 500]
        S = X[block] @ X[:n].T
        S[np.arange(block.size), block] = -np.inf
        top = np.argpartition(-S, 10, axis=1)[:, :10]
        order = np.argsort(-np.take_along_axis(S, top, axis=1), axis=1, kind="stable")
        out[s : s + block.size] = np.take_along_axis(top, order, axis=1)
    return out, time.perf_counter() - started


def people_vectors(
    n: int, level: str
) -> tuple[list[tuple[str | None, ...]], list[str], NDArray[np.float32], NDArray[Any]]:
    """Normalised rows, field types, unit vectors (n, dim) and gold ids of n people."""
    from er.pipeline.config import _featurizer, field_types, new_collection_config

    people = real_people(n, level=level, seed=TEST_SEED)
    gold = np.array([str(p.pop("entity")) for p in people])
    config = new_collection_config(people[:BATCH], id_field="rec_id", gold_field=None)
    types, featurize = field_types(config), _featurizer(config)
    assert types is not None
    rows = types.normalise([{k: v for k, v in p.items() if k != "rec_id"} for p in people]).rows
    del people
    X = np.vstack(
        [
            featurize([dict(zip(types.names, r, strict=True)) for r in rows[s : s + 5000]])
            for s in range(0, n, 5000)
        ]
    )
    return rows, list(types.kinds), X, gold


def compare(
    X: NDArray[np.float32], gold: NDArray[Any], lists: list[NDArray[np.int64]], n: int
) -> dict[str, Any]:
    """The keys' lists of the last ``len(lists)`` batches before ``n`` against exact
    search among the records up to each one's batch (what the writer had then)."""
    exact_parts, seconds = [], 0.0
    stop = n - BATCH * (len(lists) - 1)
    for batch in lists:
        top, took = exact_top(X, np.arange(stop - batch.shape[0], stop), stop)
        exact_parts.append(top)
        seconds, stop = seconds + took, stop + BATCH
    exact, keys = np.vstack(exact_parts), np.vstack(lists)
    queries = np.arange(n - exact.shape[0], n)
    agree = [len(set(a) & set(b)) / 10 for a, b in zip(exact, keys, strict=True)]

    def matches(top: NDArray[np.int64]) -> list[set[int]]:
        return [
            {int(x) for x in t if x >= 0 and gold[x] == gold[q]}
            for q, t in zip(queries, top, strict=True)
        ]

    em, km = matches(exact), matches(keys)
    n_exact = sum(len(s) for s in em)
    return {
        "queries": int(queries.size),
        "recall_at_10": float(np.mean(agree)),
        "matches_exact": n_exact,
        "matches_keys": sum(len(s) for s in km),
        "exact_matches_kept": sum(len(a & b) for a, b in zip(em, km, strict=True))
        / max(n_exact, 1),
        "exact_s_per_batch": BATCH * seconds / queries.size,
    }


def stream(args: argparse.Namespace) -> None:
    from er.ann import KeyIndex, record_keys
    from er.ann._index import rank

    rows, kinds, X, gold = people_vectors(args.n, args.level)
    index = KeyIndex(len(record_keys(rows[:1], kinds)[0]), budget=args.budget)
    seconds: list[list[float]] = []  # per batch: keys, add (and merge), read, re-score
    lists: list[NDArray[np.int64]] = []
    for start in range(0, args.n, BATCH):
        stop = min(start + BATCH, args.n)
        t0 = time.perf_counter()
        keys = record_keys(rows[start:stop], kinds)
        t1 = time.perf_counter()
        ids = index.add(keys)
        index._catch_up()
        t2 = time.perf_counter()
        candidates = index.candidates(ids)
        t3 = time.perf_counter()
        top, _ = rank(X[start:stop], X[:stop], candidates, 10, np.float32)
        seconds.append([t1 - t0, t2 - t1, t3 - t2, time.perf_counter() - t3])
        lists = [*lists, top][-(args.queries // BATCH) :]
        if stop in args.at:
            row = compare(X, gold, lists, stop)
            emit(
                {
                    "n": stop,
                    "level": args.level,
                    "budget": args.budget,
                    **row,
                    "keys_s_per_batch": float(np.sum(seconds[-10:]) / 10),
                    **dict(
                        zip(
                            ("hash_s", "add_s", "read_s", "rescore_s"),
                            np.mean(seconds[-10:], axis=0).round(4).tolist(),
                            strict=True,
                        )
                    ),
                    "segments": len(index._segments),
                    "keys_gib": index.nbytes / 2**30,
                    "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                    "machine": f"{platform.machine()}, {platform.python_version()}",
                },
                args.json,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--at", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--level", default="hard", choices=["medium", "hard"])
    ap.add_argument("--budget", type=int, default=None, help="default: er.ann.KEY_BUDGET")
    ap.add_argument("--queries", type=int, default=2000, help="the last records before each size")
    ap.add_argument("--json", type=Path, default=None, help="append one JSON row per size")
    args = ap.parse_args()
    if args.budget is None:
        from er.ann._keys import KEY_BUDGET

        args.budget = KEY_BUDGET
    stream(args)


if __name__ == "__main__":
    main()
