"""Quality, speed and memory of er's clustering cores next to average-linkage HAC.

    python bench/bench_cluster.py quality            # DP / best-level F1 table
    python bench/bench_cluster.py speed --sizes 10000 20000 40000 --big 100000
    python bench/bench_cluster.py defaults --sizes 5000 20000 --seeds 0 1 2
    python bench/bench_cluster.py one --algo scc --data hard --n 20000   # one run, JSON

Every measurement runs in its own process, which reports its wall time and its peak
resident memory (ru_maxrss), so figures do not leak between runs. The peer is
fastcluster's average linkage on cosine distances (the exact HAC tree), run the same
way on the same data. Every row carries the command that reproduces it; best-level F1
scores every level of every tree (HAC's n - 1 merge levels included), in one pass.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np

# The quality data sets: sklearn's bundled three, GRINCH's synthetic set, and a hard
# 64-d mixture of many small overlapping clusters (HAC DP about 0.87 at 20k), on which
# the methods differ (the earlier easy mixture gave DP 1.000 to nearly everything).
QUALITY_SETS = (
    ("iris", None),
    ("wine", None),
    ("digits", None),
    ("grinch_synthetic", None),
    ("hard", 20_000),
)
ALGOS = [
    "hac",
    "scc",
    "scc-old",
    "scc-auto",
    "scc-annoy",
    "mbscc",
    "mbscc-centroid",
    "mbscc-hnsw",
    "scc-mbscc",
    "scc-mbscc-centroid",
    "grinch",
    "grinch-approx",
    "grinch-approx-hnsw",
    "rotate",
    "greedy",
    "llama",
    "affinity",
    "recipnn",
]
MBSCC_TARGET = [
    "mbscc",
    "mbscc-hnsw",
    "scc-mbscc",
    "mbscc-centroid",
    "scc-mbscc-centroid",
    "scc-auto",
]
QUALITY_ALGOS = [a for a in ALGOS if a not in ("scc-old", *MBSCC_TARGET) or a == "mbscc"]
SPEED_ALGOS = ["hac", "scc", "scc-auto", "mbscc", "llama"]
# 100k: the algorithms that finish in minutes (HAC would need ~75 GB; GRINCH, ROTATE,
# GREEDY search every leaf per insertion, Affinity / RecipNN add nothing to SCC's row).
BIG_ALGOS = ["scc-auto", "mbscc", "llama"]
# The paper's approximations (§3.5.2) as this script has always run GRINCH with them.
GRINCH_APPROX = {
    "rotate_cap": 100,
    "graft_cap": 100,
    "restruct_cap": 100,
    "single_elimination": True,
    "graft_candidates": 50,
}
# One hnswlib search per inserted point for grinch-approx-hnsw: M as er.ann's default;
# ef 64 (>= the 50 candidates; at er.ann's 300 the queries cost more than GRINCH's
# own moves) and ef_construction 40 (DP at 20k 0.8468 against 0.8459 at 100).
GRINCH_HNSW = {"M": 16, "ef_construction": 40, "ef": 64}
# mbscc-hnsw's index: the same cheap graph (er.ann's defaults, ef_construction 100 and
# ef 300, cost MBSCC more than its exact search at 20k: 14.0 s against 6.9 s in all).
MBSCC_HNSW = GRINCH_HNSW
# SCC's parameters before issue #13 changed its defaults (sparse average linkage, 30
# geometric levels from the graph's largest linkage); MBSCC keeps these as its defaults.
SCC_OLD = {"linkage": "average", "schedule": "geometric", "n_levels": 30}
# MBSCC with SCC's linkage and levels (thresholds fixed at 1.0 -> 0.0, as MBSCC's are)
MBSCC_CENTROID = {"linkage": "centroid", "schedule": "linear", "n_levels": 100}
# The settings tried before choosing SCC's defaults (`defaults --candidates`).
SCC_CANDIDATES = {
    f"{link[:3]}{levels}{sched[:3]}": {"linkage": link, "n_levels": levels, "schedule": sched}
    for link in ("average", "centroid")
    for sched in ("geometric", "linear")
    for levels in (30, 50, 100, 200)
}


def load(name: str, n: int | None, seed: int = 0) -> tuple[Any, np.ndarray]:
    """Datasets: sklearn's bundled digits/iris/wine, GRINCH synthetic, Gaussian mixture."""
    if name in ("digits", "iris", "wine"):
        from sklearn import datasets

        X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
        return (X - X.mean(axis=0)).astype(np.float32), y
    if name == "grinch_synthetic":
        from er.cluster._synthetic import grinch_synthetic

        return grinch_synthetic(seed=seed)
    if name == "hard":
        from er.cluster._synthetic import hard_mixture

        return hard_mixture(n or 20_000, seed=seed)
    # Many small clusters: n points, 64-d, n/10 clusters (20k points -> 2k clusters).
    rng = np.random.default_rng(seed)
    n = n or 20_000
    k = max(n // 10, 1)
    centers = rng.normal(size=(k, 64))
    y = rng.integers(0, k, n)
    X = centers[y] + rng.normal(scale=0.25, size=(n, 64))
    return X.astype(np.float32), y


def run_hac(X: Any) -> Any:
    import fastcluster

    from er.cluster import Hierarchy

    Xd = X.toarray() if hasattr(X, "toarray") else X
    return Hierarchy.from_linkage(fastcluster.linkage(Xd, method="average", metric="cosine"))


def run_grinch_approx(X: Any, batch: int, hnsw: bool, overlap: bool = True) -> Any:
    """GRINCH's product defaults (leaf grafting, size cap 100) with the §3.5.2 approximations.

    ``hnsw``: each point's candidate leaves come from one hnswlib search (k =
    ``graft_candidates``) among the points of earlier mini-batches, passed as
    ``neighbors=``; GRINCH compares a batch's own rows exactly. Otherwise GRINCH
    searches every earlier point exactly, a mini-batch at a time. ``overlap``: see
    :func:`_index_beside`; GRINCH reads only the neighbours searched before, so the
    tree is the same either way.
    """
    from er import cluster

    est = cluster.Grinch(**GRINCH_APPROX)
    if not hnsw:
        for s in range(0, X.shape[0], batch):
            est.partial_fit(X[s : s + batch])
        return est.hierarchy_
    from er.ann import make_index

    index = make_index("hnsw", dim=X.shape[1], seed=0, **GRINCH_HNSW)

    def step(rows: slice, unit: np.ndarray, near: Any) -> None:
        est.partial_fit(X[rows], neighbors=near)

    def search(unit: np.ndarray) -> Any:
        return index.query(unit, GRINCH_APPROX["graft_candidates"])

    _index_beside(index, X, batch, search, step, overlap)
    return est.hierarchy_


def run_mbscc_hnsw(X: np.ndarray, batch: int, overlap: bool = True) -> Any:
    """MBSCC on the index, as the pipeline runs it: each mini-batch enters an
    er.ann hnswlib index (``MBSCC_HNSW``) and MBSCC takes the batch's k-NN from it
    (``neighbors=``) instead of searching every earlier point itself.

    The lists are found before the batch enters the index (old points searched, the
    batch's own rows compared exactly: ``neighbors_before_add``); ``overlap``: see
    :func:`_index_beside`. (Before 2026-11-23's fourth session the batch was added,
    then searched: ``batch_neighbors``.)
    """
    from er import cluster
    from er.ann import make_index, neighbors_before_add

    est = cluster.MBSCC(k=10)
    index = make_index("hnsw", dim=X.shape[1], seed=0, **MBSCC_HNSW)

    def step(rows: slice, unit: np.ndarray, near: Any) -> None:
        est.partial_fit(unit, neighbors=near)

    _index_beside(index, X, batch, partial(neighbors_before_add, index, k=est.k), step, overlap)
    return est.hierarchy_


def _index_beside(
    index: Any,
    X: Any,
    batch: int,
    search: Callable[[np.ndarray], Any],
    step: Callable[[slice, np.ndarray, Any], object],
    overlap: bool,
) -> None:
    """Run a core over the mini-batches of X on ``index``, the index's work beside
    the core's.

    Parameters
    ----------
    index : er.ann index
        Empty; each batch is added after it is searched.
    X : array-like of shape (n, d)
    batch : int
        Rows per mini-batch.
    search : callable (unit) -> neighbours
        A batch's neighbours among the points indexed so far; ``unit`` is the batch
        as float32 unit rows, shape (b, d).
    step : callable (rows, unit, neighbours)
        The core's step on the batch ``X[rows]``.
    overlap : bool
        While the core steps batch i, a second thread adds batch i to the index,
        then normalises and searches batch i + 1 (hnswlib releases the GIL, and
        inserts on one thread with its fixed seed, so the index is the one of a plain
        insert; the core reads only what was searched before). Otherwise that work
        ends before the step starts. Either way every batch is searched among
        exactly the batches before it, so the cores' results are the same.
        (Before 2026-11-23's fifth session, the search of batch i + 1 waited for
        step i.)
    """
    from er import cluster

    def unit_of(rows: slice) -> np.ndarray:
        return cluster.normalize_rows(np.asarray(X[rows])).astype(np.float32)

    def index_work(unit: np.ndarray, following: slice | None) -> tuple[Any, Any]:
        """Add this batch; normalise and search the next one, if any."""
        index.add(unit)
        if following is None:
            return None, None
        ahead = unit_of(following)
        return ahead, search(ahead)

    batches = [slice(s, s + batch) for s in range(0, X.shape[0], batch)]
    if not batches:
        return
    unit = unit_of(batches[0])
    near = search(unit)
    with ThreadPoolExecutor(1) as pool:
        for rows, following in zip(batches, [*batches[1:], None], strict=True):
            work = pool.submit(index_work, unit, following)
            if not overlap:
                work.result()
            step(rows, unit, near)
            unit, near = work.result()


def run_algo(algo: str, X: Any, batch: int, overlap_index: bool = True) -> Any:
    from er import cluster

    if algo == "hac":
        return run_hac(X)
    if algo == "scc-old":
        Xd = X.toarray() if hasattr(X, "toarray") else X
        return cluster.SCC(k=10, **SCC_OLD).fit(Xd).hierarchy_
    if algo == "scc-auto":
        from er.ann import index_knn_graph

        Xd = X.toarray() if hasattr(X, "toarray") else X
        graph = index_knn_graph(Xd, 10, backend="auto")
        return cluster.SCC(k=10).fit(Xd, graph=graph).hierarchy_
    if algo == "scc-annoy":
        from er.ann import annoy_knn_graph

        Xd = X.toarray() if hasattr(X, "toarray") else X
        return cluster.SCC(k=10).fit(Xd, graph=annoy_knn_graph(Xd, 10)).hierarchy_
    if algo in ("grinch-approx", "grinch-approx-hnsw"):
        return run_grinch_approx(X, batch, algo.endswith("hnsw"), overlap_index)
    if algo in ("grinch", "rotate", "greedy"):
        # The rows in RESULTS.md were measured before graft_from and size_cap existed:
        # Alg. 8's per-ancestor grafting, no size cap.
        fixed = {"graft_from": "ancestors", "size_cap": None}
        est = cluster.Grinch(mode=algo, **fixed, **(GRINCH_APPROX if algo == "grinch" else {}))
        for s in range(0, X.shape[0], batch):
            est.partial_fit(X[s : s + batch])
        return est.hierarchy_
    Xd = X.toarray() if hasattr(X, "toarray") else X
    if algo == "mbscc-hnsw":
        return run_mbscc_hnsw(Xd, batch, overlap_index)
    if algo in ("mbscc", "mbscc-centroid"):
        est = cluster.MBSCC(k=10, **(MBSCC_CENTROID if algo == "mbscc-centroid" else {}))
        for s in range(0, Xd.shape[0], batch):
            est.partial_fit(Xd[s : s + batch])
        return est.hierarchy_
    if algo in ("scc-mbscc", "scc-mbscc-centroid"):
        # batch SCC with MBSCC's parameters and fixed thresholds: MBSCC's own target
        from er.ann import index_knn_graph

        same = MBSCC_CENTROID if algo == "scc-mbscc-centroid" else SCC_OLD
        graph = index_knn_graph(Xd, 10, backend="auto")
        est = cluster.SCC(k=10, tau_max=1.0, tau_min=0.0, **same)
        return est.fit(Xd, graph=graph).hierarchy_
    if algo == "llama":
        return cluster.Llama(k=10, p=5, n_rounds=50).fit(Xd).hierarchy_
    cls = {"scc": cluster.SCC, "affinity": cluster.Affinity, "recipnn": cluster.RecipNN}[algo]
    return cls(k=10).fit(Xd).hierarchy_


def one(args: argparse.Namespace) -> None:
    from er.evaluation import best_level_f1, dendrogram_purity, jaccard_metrics

    X, y = load(args.data, args.n)
    start, cpu_start = time.perf_counter(), time.process_time()
    h = run_algo(args.algo, X, args.batch, overlap_index=args.overlap_index)
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start  # all threads of this process
    cmd = f"python bench/bench_cluster.py one --algo {args.algo} --data {args.data}"
    cmd += (f" --n {args.n}" if args.n else "") + f" --batch {args.batch}"
    cmd += "" if args.overlap_index else " --sequential-index"
    out: dict[str, Any] = {
        "command": cmd + ("" if args.metrics else " --no-metrics"),
        "algo": args.algo,
        "data": args.data,
        "n": int(X.shape[0]),
        "seconds": round(seconds, 3),
        "points_per_s": round(X.shape[0] / seconds, 1),
        "cpu_seconds": round(cpu_seconds, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "nodes_per_point": round(h.n_nodes / X.shape[0], 2),
    }
    if args.metrics:
        if h.is_tree:
            out["dp"] = round(dendrogram_purity(h, y), 4)
            out["best_level_f1"] = round(best_level_f1(h, y)[0], 4)  # every level
        jacc = jaccard_metrics(h, y)
        out["jacc_lbl"] = round(jacc["jacc_lbl"], 4)
        out["jacc_pt"] = round(jacc["jacc_pt"], 4)
    print(json.dumps(out), flush=True)


def _one_command(algo: str, data: str, n: int | None, batch: int, metrics: bool) -> list[str]:
    cmd = ["one", "--algo", algo, "--data", data] + (["--n", str(n)] if n else [])
    return cmd + ["--batch", str(batch)] + ([] if metrics else ["--no-metrics"])


def _child(algo: str, data: str, n: int | None, batch: int, metrics: bool, timeout: int) -> dict:
    args = _one_command(algo, data, n, batch, metrics)
    head = {"command": "python bench/bench_cluster.py " + " ".join(args), "algo": algo, "n": n}
    try:
        done = subprocess.run(
            [sys.executable, __file__, *args], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {**head, "data": data, "error": f"over {timeout} s"}
    if done.returncode != 0:
        return {**head, "data": data, "error": done.stderr.strip().splitlines()[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _available_gb() -> float:
    """MemAvailable from /proc/meminfo, in GB (inf where there is no /proc)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 / 1e9
    except OSError:
        pass
    return float("inf")


def _hac_needs_gb(n: int) -> float:
    """fastcluster's peak for n points: about 8 n^2 bytes (12.3 GB measured at 40k), plus
    a margin of 25% for the rest of the machine."""
    return 10.0 * n * n / 1e9


def marking(args: argparse.Namespace) -> None:
    """DP of MBSCC's paper marking and exact marking next to batch SCC, same thresholds."""
    from er.cluster import MBSCC, SCC
    from er.evaluation import dendrogram_purity

    print(f"# {platform.node()} {platform.machine()} python {platform.python_version()}")
    batches = " ".join(map(str, args.batches))
    print(f"# command: python bench/bench_cluster.py marking --batches {batches}")
    for data, n in QUALITY_SETS:
        X, y = load(data, n)
        Xd = X.toarray() if hasattr(X, "toarray") else X
        same = {**SCC_OLD, "tau_max": 1.0, "tau_min": 0.0}  # MBSCC's default thresholds
        ref = dendrogram_purity(SCC(k=10, **same).fit(Xd).hierarchy_, y)
        for batch in args.batches:
            if Xd.shape[0] / batch > 300:  # keep each run to a few hundred mini-batches
                continue
            row: dict[str, Any] = {
                "data": data,
                "n": int(Xd.shape[0]),
                "batch": batch,
                "scc_dp": round(ref, 4),
            }
            for mode in ("paper", "exact"):
                start = time.perf_counter()
                m = MBSCC(k=10, marking=mode)
                for s in range(0, Xd.shape[0], batch):
                    m.partial_fit(Xd[s : s + batch])
                row[f"{mode}_dp"] = round(dendrogram_purity(m.hierarchy_, y), 4)
                row[f"{mode}_s"] = round(time.perf_counter() - start, 2)
            row["paper_gap"] = round(row["paper_dp"] - ref, 4)
            print(json.dumps(row), flush=True)


def _machine() -> str:
    model = "?"
    try:
        with open("/proc/cpuinfo") as fh:
            model = next(ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    cpus = os.cpu_count()
    return f"# {platform.node()} {model}, {cpus} CPUs, python {platform.python_version()}"


def quality(args: argparse.Namespace) -> None:
    print(_machine())
    algos = "" if args.algos == QUALITY_ALGOS else " --algos " + " ".join(args.algos)
    print(f"# command: python bench/bench_cluster.py quality{algos} --timeout {args.timeout}")
    for data, n in QUALITY_SETS:
        for algo in args.algos:
            print(json.dumps(_child(algo, data, n, args.batch, True, args.timeout)), flush=True)


def speed(args: argparse.Namespace) -> None:
    """Every algorithm and the peer HAC on the hard mixture, one process per cell.

    HAC is skipped (a row says why) where its n x n distances would not fit in the
    memory available now; ``--big`` sizes run only ``--big-algos``.
    """
    print(_machine())
    sizes = " ".join(map(str, args.sizes)) + "".join(f" --big {b}" for b in args.big)
    algos = "" if args.algos == SPEED_ALGOS else " --algos " + " ".join(args.algos)
    cmd = f"python bench/bench_cluster.py speed --sizes {sizes}{algos} --timeout {args.timeout}"
    print(f"# command: {cmd}")
    cells = [(n, a) for n in args.sizes for a in args.algos]
    cells += [(n, a) for n in args.big for a in args.big_algos]
    for n, algo in cells:
        if algo == "hac" and _hac_needs_gb(n) > _available_gb():
            row = {
                "command": "python bench/bench_cluster.py "
                + " ".join(_one_command(algo, "hard", n, args.batch, args.metrics)),
                "algo": algo,
                "n": n,
                "skipped": f"needs ~{_hac_needs_gb(n):.0f} GB, {_available_gb():.1f} GB available",
            }
        else:
            row = _child(algo, "hard", n, args.batch, args.metrics, args.timeout)
        print(json.dumps(row), flush=True)


# SCC's defaults from issue #13 to issue #30 (centroid linkage, 100 linear levels).
SCC_PREV = {"linkage": "centroid", "schedule": "linear", "n_levels": 100}


def defaults(args: argparse.Namespace) -> None:
    """SCC's and MBSCC's defaults against their former ones and average-linkage HAC.

    One row per data set and seed, one process: the k-NN graph is built once per set
    and shared by the SCC settings, so their times are the rounds alone; MBSCC builds
    its own, in batches of ``--batch``.
    """
    from er.cluster import MBSCC, SCC
    from er.cluster._graph import knn_graph, normalize_rows
    from er.evaluation import dendrogram_purity
    from er.pipeline import PIPELINE_PARAMS

    print(_machine())
    sizes, seeds = " ".join(map(str, args.sizes)), " ".join(map(str, args.seeds))
    flag = " --candidates" if args.candidates else ""
    sets = " ".join(args.sets)
    cmd = f"python bench/bench_cluster.py defaults --sets {sets} --sizes {sizes} --seeds {seeds}"
    print(f"# command: {cmd} --batch {args.batch}{flag}")
    cells = [(name, None, 0) for name in args.sets if name != "hard"]
    if "hard" in args.sets:
        cells += [("hard", n, seed) for n in args.sizes for seed in args.seeds]
    for name, n, seed in cells:
        X, y = load(name, n, seed)
        X = np.asarray(X.toarray() if hasattr(X, "toarray") else X, np.float32)
        start = time.perf_counter()
        W = knn_graph(normalize_rows(X), 10, normalized=True)
        row: dict[str, Any] = {"data": name, "n": int(X.shape[0]), "seed": seed}
        row["graph_s"] = round(time.perf_counter() - start, 2)
        start = time.perf_counter()
        h = run_hac(X)
        row["hac_s"] = round(time.perf_counter() - start, 2)
        row["hac_dp"] = round(dendrogram_purity(h, y), 4)
        del h
        settings = {"scc_old": SCC_OLD, "scc_prev": SCC_PREV, "scc_new": {}}
        if args.candidates:
            settings |= SCC_CANDIDATES
        for label, params in settings.items():
            start = time.perf_counter()
            h = SCC(k=10, **params).fit(X, graph=W).hierarchy_
            row[f"{label}_s"] = round(time.perf_counter() - start, 2)
            row[f"{label}_dp"] = round(dendrogram_purity(h, y), 4)
        for label, params in {"mbscc_old": PIPELINE_PARAMS["mbscc"], "mbscc_new": {}}.items():
            start = time.perf_counter()
            est = MBSCC(k=10, **params)
            for s in range(0, X.shape[0], args.batch):
                est.partial_fit(X[s : s + args.batch])
            row[f"{label}_s"] = round(time.perf_counter() - start, 2)
            row[f"{label}_dp"] = round(dendrogram_purity(est.hierarchy_, y), 4)
        print(json.dumps(row), flush=True)


def levels(args: argparse.Namespace) -> None:
    """Where one MBSCC mini-batch's time goes at n points, round by round.

    Builds MBSCC on the hard mixture up to ``--n`` points in batches of ``--batch``,
    then adds one more batch and prints, per round: clusters and graph entries
    going in, the share of clusters and points marked (U(i), Eq. 4.10), the
    seconds the round took, and whether the old points' partition after it equals
    the last batch's (the early-stopping test of §4.2.1); then the batch's time by
    part. Marks are read off MBSCC's own functions through wrappers.
    """
    from er import cluster
    from er.cluster import _mbscc, _rounds
    from er.cluster._scc import thresholds

    X, _ = load("hard", args.n + args.batch)
    Xd = X.toarray() if hasattr(X, "toarray") else X
    est = cluster.MBSCC(k=10)
    for s in range(0, args.n, args.batch):
        est.partial_fit(Xd[s : s + args.batch])
    rows: list[dict[str, Any]] = []
    marks: list[np.ndarray] = []
    parts: dict[str, float] = {}
    real_merge, real_marks, real_add = (
        _rounds.Agglomerator.merge,
        _mbscc._next_marks,
        _mbscc._KnnLists.add,
    )
    real_ids, real_run = _mbscc.MBSCC._stable_ids, _mbscc._run_marked

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*a: Any, **kw: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                parts[name] = parts.get(name, 0.0) + time.perf_counter() - start

        return wrapper

    def merge(agg: Any, *a: Any, **kw: Any) -> int:
        pc, marked, entries = agg.point_cluster, marks[-1], int(agg.W.nnz)
        fresh = np.zeros(agg.n_clusters, bool)
        fresh[pc[marked]] = True
        start = time.perf_counter()
        merged = real_merge(agg, *a, **kw)
        rows.append(
            {
                "clusters": int(fresh.size),
                "entries": entries,
                "marked_clusters": round(float(fresh.mean()), 3),
                "marked_points": round(float(marked.mean()), 3),
                "seconds": round(time.perf_counter() - start, 4),
            }
        )
        return merged

    def add(knn: Any, *a: Any, **kw: Any) -> np.ndarray:
        marks.append(real_add(knn, *a, **kw))
        return marks[-1]

    def next_marks(*a: Any, **kw: Any) -> np.ndarray:
        marks.append(real_marks(*a, **kw))
        return marks[-1]

    old_rounds = est._rounds
    _rounds.Agglomerator.merge = merge
    _mbscc._next_marks = next_marks
    _mbscc._KnnLists.add = timed("k-NN lists", add)
    _mbscc.MBSCC._stable_ids = timed("stable ids", real_ids)
    _mbscc._run_marked = timed("rounds", real_run)
    try:
        start = time.perf_counter()
        est.partial_fit(Xd[args.n : args.n + args.batch])
        total = time.perf_counter() - start
    finally:
        _rounds.Agglomerator.merge = real_merge
        _mbscc._next_marks, _mbscc._KnnLists.add = real_marks, real_add
        _mbscc.MBSCC._stable_ids, _mbscc._run_marked = real_ids, real_run
    print(f"{_machine()}; load {os.getloadavg()[0]:.2f}")
    print(f"# command: python bench/bench_cluster.py levels --n {args.n} --batch {args.batch}")
    taus = thresholds(1.0, 0.0, est.n_levels, est.schedule)
    for r, row in enumerate(rows):
        old, new = old_rounds[r].out, est._rounds[r].out
        row = {"round": r, "tau": round(float(taus[r]), 4), **row}
        row["old_partition_kept"] = bool(np.array_equal(old, new[: old.size]))
        print(json.dumps(row))
    parts = {k: round(v, 3) for k, v in parts.items()}
    print(json.dumps({"batch_seconds": round(total, 3), **parts}))


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("one")
    p.add_argument("--algo", choices=ALGOS, required=True)
    p.add_argument("--data", default="hard")
    p.add_argument("--n", type=int, default=None)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--no-metrics", dest="metrics", action="store_false")
    p.add_argument(
        "--sequential-index",
        dest="overlap_index",
        action="store_false",
        help="*-hnsw: the index work (this batch in, the next searched) ends before the step",
    )
    p.set_defaults(func=one)
    p = sub.add_parser("marking")
    p.add_argument("--batches", nargs="+", type=int, default=[10, 100, 1000])
    p.set_defaults(func=marking)
    p = sub.add_parser("levels")
    p.add_argument("--n", type=int, default=99_000)
    p.add_argument("--batch", type=int, default=1000)
    p.set_defaults(func=levels)
    p = sub.add_parser("defaults")
    p.add_argument("--sets", nargs="+", default=["iris", "wine", "digits", "hard"])
    p.add_argument("--batch", type=int, default=1000, help="MBSCC's mini-batches")
    p.add_argument("--sizes", nargs="+", type=int, default=[5_000, 20_000])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--candidates", action="store_true", help="also every SCC_CANDIDATES setting")
    p.set_defaults(func=defaults)
    for name, func, algos in (("quality", quality, QUALITY_ALGOS), ("speed", speed, SPEED_ALGOS)):
        p = sub.add_parser(name)
        p.add_argument("--algos", nargs="+", default=algos, choices=ALGOS)
        p.add_argument("--sizes", nargs="+", type=int, default=[10_000, 20_000, 40_000])
        p.add_argument("--big", nargs="*", type=int, default=[], help="sizes for --big-algos")
        p.add_argument("--big-algos", nargs="+", default=BIG_ALGOS, choices=ALGOS)
        p.add_argument("--batch", type=int, default=1000)
        p.add_argument("--timeout", type=int, default=900)
        p.add_argument("--no-metrics", dest="metrics", action="store_false")
        p.set_defaults(func=func)
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
