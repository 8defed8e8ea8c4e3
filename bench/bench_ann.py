"""The incremental k-NN index on the hard 64-d mixture (issue #13).

    python bench/bench_ann.py hac --n 20000             # average-linkage HAC DP (fastcluster)
    python bench/bench_ann.py recall --n 100000          # recall@10, ms/query, per backend
    python bench/bench_ann.py scc --n 100000             # SCC DP on the auto vs exact graph
    python bench/bench_ann.py mbscc --n 100000 --batch 1000   # MBSCC on the index
    python bench/bench_ann.py people --n 100000          # the pipeline's 1,024-d index
    python bench/bench_ann.py screens --n 100000         # cheaper screens for that index

Data: ``er.cluster._synthetic.hard_mixture(n, noise=...)`` (64-d, clusters of 10).
Recall@10 of a backend is measured on 1,000 held-out queries drawn from the same
mixture against brute-force exact search; the index is built by adding the points
in mini-batches of 1,000, as the pipeline does. Every row prints its command.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import time
from typing import Any

import numpy as np

from er.ann import batch_neighbors, index_knn_graph, make_index
from er.cluster import normalize_rows
from er.cluster._synthetic import hard_mixture


def header(command: str) -> None:
    print(f"# {platform.node()} {platform.machine()} python {platform.python_version()}")
    print(f"# command: {command}", flush=True)


def data(n: int, noise: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    X, y = hard_mixture(n, noise=noise, seed=seed)
    return normalize_rows(X), y


def rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def hac(args: argparse.Namespace) -> None:
    """Average-linkage HAC DP on a subsample (fastcluster, cosine).

    The points of ``hard_mixture`` are drawn independently, so the first ``sample``
    of the n points are a uniform subsample of the n-point mixture.
    """
    import fastcluster

    from er.cluster import Hierarchy
    from er.evaluation import dendrogram_purity

    header(
        f"python bench/bench_ann.py hac --n {args.n} --sample {args.sample} --noise {args.noise}"
    )
    X, y = data(args.n, args.noise)
    X, y = X[: args.sample], y[: args.sample]
    start = time.perf_counter()
    h = Hierarchy.from_linkage(fastcluster.linkage(X, method="average", metric="cosine"))
    seconds = time.perf_counter() - start
    dp = dendrogram_purity(h, y)
    row = {"algo": "hac", "n": args.n, "sample": args.sample, "noise": args.noise}
    print(json.dumps(row | {"dp": round(dp, 4), "seconds": round(seconds, 1)}))


def recall(args: argparse.Namespace) -> None:
    """recall@10 and ms/query of each backend against brute force.

    One index per build setting; query-time settings (hnsw ``ef``, annoy ``search_k``)
    are varied on that index.
    """
    cmd = f"python bench/bench_ann.py recall --n {args.n} --noise {args.noise}"
    header(cmd + f" --backends {' '.join(args.backends)} --ef {' '.join(map(str, args.ef))}")
    X, _ = data(args.n + 1000, args.noise)
    X, Q = X[: args.n], X[args.n :]
    exact = make_index("exact", dim=X.shape[1])
    exact.add(X)
    start = time.perf_counter()
    truth, _ = exact.query(Q, 10)
    exact_ms = (time.perf_counter() - start) * 1000 / Q.shape[0]
    print(json.dumps({"backend": "exact", "n": args.n, "ms_per_query": round(exact_ms, 3)}))
    builds = {
        "hnsw": [({"M": 16, "ef_construction": 100}, "ef", args.ef)],
        "annoy": [
            ({"n_trees": 10, "buffer_size": 10_000}, "search_k", [-1]),
            ({"n_trees": 50, "buffer_size": 10_000}, "search_k", [10_000]),
        ],
    }
    for backend in args.backends:
        for build_params, knob, values in builds[backend]:
            index = make_index(backend, dim=X.shape[1], seed=0, **build_params)
            start = time.perf_counter()
            for s in range(0, X.shape[0], 1000):
                index.add(X[s : s + 1000])
            build = time.perf_counter() - start
            for value in values:
                setattr(index._ann, knob, value)
                start = time.perf_counter()
                found, _ = index.query(Q, 10)
                ms = (time.perf_counter() - start) * 1000 / Q.shape[0]
                hits = [np.intersect1d(a, b).size / 10 for a, b in zip(found, truth, strict=True)]
                row = {"backend": backend, "params": build_params | {knob: value}, "n": args.n}
                row |= {"recall@10": round(float(np.mean(hits)), 4), "ms_per_query": round(ms, 3)}
                row |= {"build_s": round(build, 1), "peak_rss_mb": rss_mb()}
                print(json.dumps(row), flush=True)


def scc(args: argparse.Namespace) -> None:
    """SCC DP on the auto (index) graph next to the exact graph.

    Two threshold settings: SCC's defaults, and the fixed 1.0 -> 0.0 that MBSCC uses
    (the batch reference of the ``mbscc`` rows).
    """
    from er.cluster import SCC, knn_graph
    from er.evaluation import dendrogram_purity

    header(f"python bench/bench_ann.py scc --n {args.n} --noise {args.noise}")
    X, y = data(args.n, args.noise)
    for name in ("auto", "exact"):
        start = time.perf_counter()
        G = index_knn_graph(X, 10, backend="auto") if name == "auto" else knn_graph(X, 10)
        graph_s = time.perf_counter() - start
        for taus in ("default", "fixed 1.0-0.0"):
            start = time.perf_counter()
            # SCC's parameters before issue #13 changed its defaults (the RESULTS rows),
            # and MBSCC's defaults: sparse average linkage, 30 geometric levels.
            old = {"linkage": "average", "schedule": "geometric", "n_levels": 30}
            fixed = {"tau_max": 1.0, "tau_min": 0.0} if taus != "default" else {}
            est = SCC(k=10, **old, **fixed)
            h = est.fit(X, graph=G).hierarchy_
            row = {"graph": name, "thresholds": taus, "n": args.n}
            row |= {"dp": round(dendrogram_purity(h, y), 4), "graph_s": round(graph_s, 1)}
            row |= {"scc_s": round(time.perf_counter() - start, 1), "peak_rss_mb": rss_mb()}
            print(json.dumps(row), flush=True)


def mbscc(args: argparse.Namespace) -> None:
    """MBSCC fed by the index in mini-batches, next to batch SCC with the same thresholds."""
    from er.cluster import MBSCC
    from er.evaluation import dendrogram_purity

    cmd = f"python bench/bench_ann.py mbscc --n {args.n} --batch {args.batch} --noise {args.noise}"
    header(cmd + f" --backend {args.backend} --marking {args.marking}")
    X, y = data(args.n, args.noise)
    index = make_index(args.backend, dim=X.shape[1], seed=0)
    est = MBSCC(k=10, marking=args.marking)
    knn_s = 0.0
    start = time.perf_counter()
    for s in range(0, X.shape[0], args.batch):
        t = time.perf_counter()
        neighbors = batch_neighbors(index, X[s : s + args.batch], 10)
        knn_s += time.perf_counter() - t
        est.partial_fit(X[s : s + args.batch], neighbors=neighbors)
    seconds = time.perf_counter() - start
    row: dict[str, Any] = {"algo": "mbscc", "backend": args.backend, "marking": args.marking}
    row |= {
        "n": args.n,
        "batch": args.batch,
        "seconds": round(seconds, 1),
        "knn_s": round(knn_s, 1),
    }
    row |= {"points_per_s": round(args.n / seconds, 1), "peak_rss_mb": rss_mb()}
    row["dp"] = round(dendrogram_purity(est.hierarchy_, y), 4)
    print(json.dumps(row), flush=True)


def people(args: argparse.Namespace) -> None:
    """The pipeline's own index at its own dimension: synthetic people (bench/people.py)
    featurized with the product's default config (1,024-d), added in batches of 1,000
    as the writer adds them. Per backend: seconds per batch (add + query k + 1) around
    10k, 50k and n; for exact search also the float32 product alone and its GFLOP/s
    (the floor of the index stage); for hnswlib recall@10 of the last batch against
    exact search, by id and counting ties (a point as near as the exact 10th counts).
    """
    knobs = f"--M {args.M} --efc {args.efc} --ef {args.ef}"
    header(f"python bench/bench_ann.py people --n {args.n} {knobs}")
    X = _people_vectors(args.n)
    marks = sorted({min(10_000, args.n), min(50_000, args.n), args.n})
    last: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    hnsw = {"M": args.M, "ef_construction": args.efc, "ef": args.ef}
    for backend, params in (("exact", {}), ("hnsw", hnsw)):
        index = make_index(backend, dim=X.shape[1], seed=0, **params)
        per_batch = []
        for s in range(0, X.shape[0], 1000):
            start = time.perf_counter()
            last[backend] = batch_neighbors(index, X[s : s + 1000], 10)
            per_batch.append(time.perf_counter() - start)
        row = {"backend": backend, "params": params}
        row |= {f"s_per_batch_at_{m}": round(per_batch[m // 1000 - 1], 3) for m in marks}
        row |= {"total_s": round(sum(per_batch), 1), "dim": int(X.shape[1]), "n": args.n}
        if backend == "exact":
            Q, P = X[-1000:], X[:-1000]
            start = time.perf_counter()
            _ = Q @ P.T
            product = time.perf_counter() - start
            gflops = 2 * Q.shape[0] * P.shape[0] * X.shape[1] / product / 1e9
            row |= {"product_s_at_n": round(product, 3), "gflop_per_s": round(gflops, 1)}
        print(json.dumps(row), flush=True)
    (ti, ts), (hi, hs) = last["exact"], last["hnsw"]
    by_id = [np.intersect1d(a[a >= 0], b).size / 10 for a, b in zip(hi, ti, strict=True)]
    tenth = ts[:, 9:10]
    with_ties = np.minimum((hs >= tenth - 1e-6).sum(axis=1), 10) / 10
    print(
        json.dumps(
            {
                "backend": "hnsw",
                "recall@10_by_id": round(float(np.mean(by_id)), 4),
                "recall@10_with_ties": round(float(np.mean(with_ties)), 4),
                "queries": int(hi.shape[0]),
            }
        ),
        flush=True,
    )


def _people_vectors(n: int) -> np.ndarray:
    """(n, 1,024) synthetic people featurized with the product's inferred config."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from people import synthetic_people

    from er.featurize import featurize, infer_config

    records = synthetic_people(n, seed=0)
    return featurize(records, infer_config(records[:1000], id_field="rec_id", gold_field="entity"))


def screens(args: argparse.Namespace) -> None:
    """Two cheaper ways to screen the pipeline's exact 1,024-d search, measured on
    the last batch of 1,000 synthetic people against the n - 1,000 before it:

    * the dense float32 product the exact index runs, and the same product with the
      points as a CSR matrix (the hashed rows are sparse), in seconds;
    * a seeded Gaussian projection to ``d'`` dimensions, then the top ``C`` by the
      projected product re-scored exactly: recall@10 against the exact top 10, and
      the projected product's seconds (the points' projections kept, as an index would).
    """
    from scipy import sparse

    from er.cluster._graph import similarities

    header(f"python bench/bench_ann.py screens --n {args.n}")
    X = _people_vectors(args.n)
    Q, P = X[-1000:], X[:-1000]
    start = time.perf_counter()
    _ = Q @ P.T
    dense_s = time.perf_counter() - start
    Ps = sparse.csr_array(P)
    start = time.perf_counter()
    _ = Ps @ np.ascontiguousarray(Q.T)
    csr_s = time.perf_counter() - start
    row = {"n": args.n, "dim": int(X.shape[1]), "nnz_per_row": round(Ps.nnz / P.shape[0], 1)}
    row |= {"dense_float32_product_s": round(dense_s, 3), "csr_times_dense_s": round(csr_s, 3)}
    print(json.dumps(row), flush=True)
    exact = similarities(Q, P)  # the index's own exact scores
    truth = np.argsort(-exact, axis=1, kind="stable")[:, :10]
    rng = np.random.default_rng(0)
    for dp in args.dims:
        R = rng.standard_normal((X.shape[1], dp)).astype(np.float32) / np.sqrt(dp)
        PR = P @ R  # an index would keep these
        start = time.perf_counter()
        SP = (Q @ R) @ PR.T
        proj_s = time.perf_counter() - start
        for C in args.candidates:
            cand = np.argpartition(-SP, C, axis=1)[:, :C]
            vals = np.take_along_axis(exact, cand, 1)
            got = np.take_along_axis(cand, np.argsort(-vals, 1, kind="stable")[:, :10], 1)
            hits = [np.intersect1d(a, b).size / 10 for a, b in zip(got, truth, strict=True)]
            out = {"projection_dims": dp, "candidates": C, "recall@10": round(np.mean(hits), 4)}
            print(json.dumps(out | {"projected_product_s": round(proj_s, 3)}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    commands = (("hac", hac), ("recall", recall), ("scc", scc), ("mbscc", mbscc))
    for name, fn in (*commands, ("people", people), ("screens", screens)):
        p = sub.add_parser(name)
        p.add_argument("--n", type=int, default=100_000)
        p.add_argument("--noise", type=float, default=1.08)
        p.set_defaults(func=fn)
        if name == "hac":
            p.add_argument("--sample", type=int, default=20_000)
        if name == "recall":
            p.add_argument("--backends", nargs="+", default=["hnsw", "annoy"])
            p.add_argument("--ef", type=int, nargs="+", default=[100, 200, 300, 400])
        if name == "people":
            p.add_argument("--M", type=int, default=16)
            p.add_argument("--efc", type=int, default=40)
            p.add_argument("--ef", type=int, default=64)
        if name == "screens":
            p.add_argument("--dims", type=int, nargs="+", default=[64, 128, 256])
            p.add_argument("--candidates", type=int, nargs="+", default=[50, 100, 200, 400])
        if name == "mbscc":
            p.add_argument("--batch", type=int, default=1000)
            p.add_argument("--backend", default="auto")
            p.add_argument("--marking", default="paper")
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
