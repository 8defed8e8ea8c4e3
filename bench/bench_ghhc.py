"""gHHC (issue #11): quality against the paper's Table 1 and er's cores, and scale.

    python bench/bench_ghhc.py quality                 # digits-200, digits, hard 20k
    python bench/bench_ghhc.py scale --n 100000 --internal 2000
    python bench/bench_ghhc.py one --algo ghhc --data digits200     # one run, JSON

Every run is its own process (one BLAS thread) reporting wall time and peak RSS, as in
bench/bench_cluster.py, whose loaders and peers (fastcluster average-linkage HAC,
SCC, GRINCH, LLAMA) this reuses. ``digits200`` is a seeded 200-point sample of
scikit-learn's digits (the paper's Table 1 used a 200-point sample it does not give).
gHHC runs with the paper's settings (lr 0.01, batches of 100, episodes of 5,000
triples, 64 internal nodes on the small sets); 2,000 nodes on the 20k mixture.
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
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_cluster

PEERS = ["hac", "scc", "grinch", "llama"]
SETS = [("digits200", None), ("digits", None), ("hard", 20_000)]
INTERNAL = {"digits200": 64, "digits": 64, "hard": 2000}


def load(name: str, n: int | None) -> tuple[np.ndarray, np.ndarray]:
    if name == "digits200":
        X, y = bench_cluster.load("digits", None)
        pick = np.random.default_rng(0).choice(X.shape[0], size=200, replace=False)
        return X[pick], y[pick]
    if name == "mixture":  # the scale run: hard_mixture's generator at any n
        from er.cluster._synthetic import hard_mixture

        return hard_mixture(n or 100_000, seed=0)
    return bench_cluster.load(name, n)


def run(algo: str, X: np.ndarray, internal: int, params: dict[str, Any]) -> Any:
    if algo != "ghhc":
        return bench_cluster.run_algo(algo, X, 1000)
    from er.cluster import GHHC

    return GHHC(n_internal=internal, **params).fit(X).hierarchy_


def one(args: argparse.Namespace) -> None:
    from er.evaluation import dendrogram_purity

    X, y = load(args.data, args.n)
    params = json.loads(args.params)
    internal = args.internal or INTERNAL.get(args.data, 64)
    start = time.perf_counter()
    h = run(args.algo, X, internal, params)
    seconds = time.perf_counter() - start
    cmd = f"python bench/bench_ghhc.py one --algo {args.algo} --data {args.data}"
    cmd += (f" --n {args.n}" if args.n else "") + (f" --internal {internal}")
    cmd += f" --params '{args.params}'" if params else ""
    out = {
        "command": cmd,
        "algo": args.algo + (f" {params}" if params else ""),
        "data": args.data,
        "n": int(X.shape[0]),
        "seconds": round(seconds, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "clusters": h.n_nodes - h.n_points,
    }
    if args.metrics:  # DP needs a tree; LLAMA's DAG gets none (as in bench_cluster.py)
        out["dp"] = round(dendrogram_purity(h, y), 4) if h.is_tree else None
    print(json.dumps(out), flush=True)


def _child(algo: str, data: str, n: int | None, params: str, extra: list[str]) -> dict:
    cmd = [sys.executable, __file__, "one", "--algo", algo, "--data", data, "--params", params]
    cmd += (["--n", str(n)] if n else []) + extra
    # One BLAS thread: on this shared 2-vCPU machine OpenBLAS's two threads made gHHC's
    # small (100 x 2000) products 8x slower; every algorithm gets the same setting.
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        return {"algo": algo, "data": data, "error": done.stderr.strip().splitlines()[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _header() -> None:
    print(f"# {platform.node()} {platform.machine()} python {platform.python_version()}")


def quality(args: argparse.Namespace) -> None:
    _header()
    for data, n in SETS:
        for algo in ["ghhc", *args.peers]:  # --params are gHHC's: the peers run without
            params = args.params if algo == "ghhc" else "{}"
            print(json.dumps(_child(algo, data, n, params, [])), flush=True)


def scale(args: argparse.Namespace) -> None:
    _header()
    extra = ["--internal", str(args.internal)] + ([] if args.metrics else ["--no-metrics"])
    print(json.dumps(_child("ghhc", "mixture", args.n, args.params, extra)), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("one")
    p.add_argument("--algo", choices=["ghhc", *bench_cluster.ALGOS], required=True)
    p.add_argument("--data", default="digits200")
    p.add_argument("--n", type=int, default=None)
    p.add_argument("--internal", type=int, default=None)
    p.add_argument("--params", default="{}", help="extra GHHC keyword arguments, JSON")
    p.add_argument("--no-metrics", dest="metrics", action="store_false")
    p.set_defaults(func=one)
    p = sub.add_parser("quality")
    p.add_argument("--peers", nargs="*", default=PEERS, choices=bench_cluster.ALGOS)
    p.add_argument("--params", default="{}")
    p.set_defaults(func=quality)
    p = sub.add_parser("scale")
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--internal", type=int, default=2000)
    p.add_argument("--params", default="{}")
    p.add_argument("--no-metrics", dest="metrics", action="store_false")
    p.set_defaults(func=scale)
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
