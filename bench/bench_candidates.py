"""Candidate generation beside the exact index: an inverted index over field n-grams.

Issue #30 asks for a candidate index whose cost per query does not grow with the
collection. This measures one design before it is built into the pipeline, against
the pipeline's exact 1,024-d search (the peer) on the same records and queries:

- records: ``people_real.py`` people at the test seed, normalised by their inferred
  field types and featurized as a pair-model collection does (``er.pipeline.config``);
- inverted index: each record's tokens are the character 3-grams of each normalised
  field, salted by the field; a token held by more than ``--cap`` records is dropped
  (blocking's usual pruning: a common trigram tells nothing); a query's candidates are
  the ``--m`` records with the highest IDF-weighted token overlap, re-scored exactly by
  the cosine of the pipeline's vectors, best 10 kept;
- exact: the 10 highest cosines among all records (what the writer searches today).

Per size it prints recall@10 of the inverted index against exact search, how many true
matches (gold entity) each finds in its 10, the share of the exact search's matches
the inverted index keeps, and milliseconds per query of each (exact: numpy's BLAS,
both cores; inverted: one).

    python -m bench candidates --n 10000 100000 --cap 1000 --m 100
"""

from __future__ import annotations

import argparse
import platform
import resource
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rows import emit
from people_real import TEST_SEED, real_people


def field_trigrams(rows: list[tuple[str | None, ...]]) -> sparse.csr_matrix:
    """(n, V) binary record x token matrix: the field-salted character 3-grams of each
    normalised value (padded by one space each side), tokens numbered as first seen."""
    vocab: dict[int, int] = {}
    indices: list[int] = []
    indptr = [0]
    for row in rows:
        seen: set[int] = set()
        for f, value in enumerate(row):
            if not value:
                continue
            text = f" {value} "
            for i in range(len(text) - 2):
                seen.add(zlib.crc32(f"{f}:{text[i : i + 3]}".encode()))
        indices.extend(vocab.setdefault(t, len(vocab)) for t in seen)
        indptr.append(len(indices))
    data = np.ones(len(indices), np.float32)
    return sparse.csr_matrix((data, np.array(indices), np.array(indptr)), (len(rows), len(vocab)))


def inverted_top(
    T: sparse.csr_matrix, X: NDArray[np.float32], queries: NDArray[np.int64], cap: int, m: int
) -> tuple[NDArray[np.int64], float, float]:
    """Each query's 10 best by cosine among its ``m`` best by IDF-weighted overlap of
    the tokens held by at most ``cap`` records. Returns (q, 10) ids (-1: none), the
    seconds to build the index and the seconds of the queries."""
    started = time.perf_counter()
    df = np.asarray(T.sum(axis=0)).ravel()
    keep = np.flatnonzero(df <= cap)
    idf = np.log(T.shape[0] / df[keep]).astype(np.float32)
    index = T[:, keep].T.tocsr()  # token -> records
    built = time.perf_counter() - started
    started = time.perf_counter()
    weighted = T[queries][:, keep] @ sparse.diags(idf)
    overlap = (weighted @ index).tocsr()
    out = np.full((queries.size, 10), -1, np.int64)
    for i, q in enumerate(queries.tolist()):
        lo, hi = overlap.indptr[i], overlap.indptr[i + 1]
        cols, vals = overlap.indices[lo:hi], overlap.data[lo:hi]
        cols, vals = cols[cols != q], vals[cols != q]
        if cols.size > m:
            cols = cols[np.argpartition(-vals, m)[:m]]
        best = cols[np.argsort(-(X[cols] @ X[q]), kind="stable")[:10]]
        out[i, : best.size] = best
    return out, built, time.perf_counter() - started


def exact_top(
    X: NDArray[np.float32], queries: NDArray[np.int64]
) -> tuple[NDArray[np.int64], float]:
    """(q, 10) the 10 highest cosines of each query among all other rows; seconds."""
    started = time.perf_counter()
    out = np.empty((queries.size, 10), np.int64)
    for s in range(0, queries.size, 500):
        block = queries[s : s + 500]
        S = X[block] @ X.T
        S[np.arange(block.size), block] = -np.inf
        top = np.argpartition(-S, 10, axis=1)[:, :10]
        order = np.argsort(-np.take_along_axis(S, top, axis=1), axis=1, kind="stable")
        out[s : s + block.size] = np.take_along_axis(top, order, axis=1)
    return out, time.perf_counter() - started


def measure(n: int, level: str, cap: int, m: int, n_queries: int) -> dict[str, Any]:
    from er.pipeline.config import _featurizer, field_types, new_collection_config

    people = real_people(n, level=level, seed=TEST_SEED)
    gold = np.array([str(p.pop("entity")) for p in people])
    config = new_collection_config(people[:1000], id_field="rec_id", gold_field=None)
    types, featurize = field_types(config), _featurizer(config)
    assert types is not None
    rows = types.normalise([{k: v for k, v in p.items() if k != "rec_id"} for p in people]).rows
    X = np.vstack(
        [
            featurize([dict(zip(types.names, r, strict=True)) for r in rows[s : s + 5000]])
            for s in range(0, n, 5000)
        ]
    )
    T = field_trigrams(rows)
    queries = np.random.default_rng(0).choice(n, min(n_queries, n), replace=False)
    exact, exact_s = exact_top(X, queries)
    inverted, built_s, inverted_s = inverted_top(T, X, queries, cap, m)
    agree = [len(set(a) & set(b)) / 10 for a, b in zip(exact, inverted, strict=True)]

    def matches(top: NDArray[np.int64]) -> list[set[int]]:
        return [
            {int(x) for x in t if x >= 0 and gold[x] == gold[q]}
            for q, t in zip(queries, top, strict=True)
        ]

    em, im = matches(exact), matches(inverted)
    n_exact = sum(len(s) for s in em)
    return {
        "n": n,
        "level": level,
        "cap": cap,
        "m": m,
        "queries": int(queries.size),
        "recall_at_10": float(np.mean(agree)),
        "matches_exact": n_exact,
        "matches_inverted": sum(len(s) for s in im),
        "exact_matches_kept": sum(len(a & b) for a, b in zip(em, im, strict=True))
        / max(n_exact, 1),
        "ms_per_query_exact": 1000 * exact_s / queries.size,
        "ms_per_query_inverted": 1000 * inverted_s / queries.size,
        "index_build_s": built_s,
        "tokens_per_record": T.nnz / n,
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "machine": f"{platform.machine()}, {platform.python_version()}",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--level", default="hard", choices=["medium", "hard"])
    ap.add_argument("--cap", type=int, default=1000)
    ap.add_argument("--m", type=int, default=100)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--json", type=Path, default=None, help="append one JSON row per size")
    args = ap.parse_args()
    for n in args.n:
        emit(measure(n, args.level, args.cap, args.m, args.queries), args.json)


if __name__ == "__main__":
    main()
