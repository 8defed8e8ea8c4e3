"""GRINCH variants side by side: DP and time on digits, the hard mixture, GRINCH's set.

    python bench/bench_grinch.py                       # the whole table (issue #7.2)
    python bench/bench_grinch.py --data digits --variants leaf ancestors
    python bench/bench_grinch.py --graft-sizes      # which grafts hurt, on digits

Digits come as bench_cluster.py prepares them (centred) and raw (``digits-raw``, as
sklearn ships them: the issue's figures), each in file order and in three seeded
shuffles. The peer is fastcluster's average linkage on cosine distances, run in the
same process on the same rows. Times are wall seconds of ``fit`` alone.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from typing import Any

import numpy as np
from bench_cluster import load, run_hac
from numpy.typing import NDArray

# Every variant the issue asks for: per-ancestor grafting (Alg. 8 as written) or one
# graft search per inserted point (the authors' codes), with and without restructure,
# with er's step caps and the paper's approximations, and with the authors' size caps.
PAPER_APPROX = {
    "rotate_cap": 100,
    "graft_cap": 100,
    "restruct_cap": 100,
    "single_elimination": True,
    "graft_candidates": 50,
}
# Every variant but "default" names size_cap, so the rows do not move with defaults.
NOCAP = {"size_cap": None}
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "greedy": {"mode": "greedy"},
    "rotate": {"mode": "rotate", **NOCAP},
    "rotate-size100": {"mode": "rotate", "size_cap": 100},
    "leaf": {"graft_from": "leaf", **NOCAP},
    "leaf-norestruct": {"graft_from": "leaf", "restructure": False, **NOCAP},
    "leaf-size100": {"graft_from": "leaf", "size_cap": 100},
    "leaf-size100-norestruct": {"graft_from": "leaf", "size_cap": 100, "restructure": False},
    "ancestors": {"graft_from": "ancestors", **NOCAP},
    "ancestors-norestruct": {"graft_from": "ancestors", "restructure": False, **NOCAP},
    "ancestors-steps10": {"graft_from": "ancestors", "graft_cap": 10, **NOCAP},
    "ancestors-approx": {"graft_from": "ancestors", **PAPER_APPROX, **NOCAP},
    "ancestors-size100": {"graft_from": "ancestors", "size_cap": 100},
}
# (data name, n, order seeds: -1 is file order)
DATA = {
    "digits": ("digits", None, [-1, 0, 1, 2]),
    "digits-raw": ("digits-raw", None, [-1, 0, 1, 2]),
    "hard": ("hard", 5_000, [-1]),
    "hard10k": ("hard", 10_000, [-1]),  # HAC 0.913; not in the default run (slow variants)
    "hard20k": ("hard", 20_000, [-1]),  # HAC 0.869, the quality table's set; fast variants only
    "grinch_synthetic": ("grinch_synthetic", None, [-1]),
}


def _load(name: str, n: int | None) -> tuple[Any, np.ndarray]:
    if name == "digits-raw":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        return X.astype(np.float32), y
    return load(name, n)


def _run(params: dict[str, Any], X: Any, y: np.ndarray) -> dict[str, Any]:
    from er.cluster import Grinch
    from er.evaluation import dendrogram_purity

    start = time.perf_counter()
    g = Grinch(**params).fit(X)
    seconds = time.perf_counter() - start
    return {
        "dp": round(dendrogram_purity(g.hierarchy_, y), 4),
        "s": round(seconds, 2),
        "grafts": g.stats_["grafts"],
        "swaps": g.stats_["restructures"],
    }


def graft_sizes() -> None:
    """Per-ancestor grafting on digits (file order): label agreement of each graft.

    For every graft of L next to V: the share of L's points carrying V's majority label,
    and V's purity, grouped by the size of V.
    """
    from er.cluster import Grinch

    class _Logged(Grinch):
        def _apply_graft(self, v: int, l: int) -> int:  # noqa: E741
            pv, pl = self._point_list(v), self._point_list(l)
            major = np.bincount(self.labels[pv]).argmax()
            agree = float(np.mean(self.labels[pl] == major))
            self.log.append((len(pv), agree, float(np.mean(self.labels[pv] == major))))
            return super()._apply_graft(v, l)

        def _point_list(self, v: int) -> NDArray[np.int64]:
            return np.flatnonzero(self._points_under(v))

    for key in ("digits-raw", "digits"):
        X, y = _load(key, None)
        g = _Logged(graft_from="ancestors", size_cap=None)
        g.labels, g.log = y, []
        g.fit(X)
        log = np.array(g.log)
        for lo, hi in ((1, 10), (11, 100), (101, len(y))):
            m = (log[:, 0] >= lo) & (log[:, 0] <= hi)
            row = {"data": key, "V points": f"{lo}-{hi}", "grafts": int(m.sum())}
            row["L in V's majority"] = round(float(log[m, 1].mean()), 3)
            row["V purity"] = round(float(log[m, 2].mean()), 3)
            print(json.dumps(row), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    default_data = [k for k in DATA if k not in ("hard10k", "hard20k")]
    ap.add_argument("--data", nargs="+", default=default_data, choices=list(DATA))
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--no-hac", dest="hac", action="store_false")
    ap.add_argument("--graft-sizes", action="store_true", help="the graft diagnostic only")
    args = ap.parse_args()
    print(f"# {platform.node()} {platform.machine()} python {platform.python_version()}")
    if args.graft_sizes:
        graft_sizes()
        return
    from er.evaluation import dendrogram_purity

    for key in args.data:
        name, n, seeds = DATA[key]
        X0, y0 = _load(name, n)
        for seed in seeds:
            order = (
                np.arange(len(y0)) if seed < 0 else np.random.default_rng(seed).permutation(len(y0))
            )
            X, y = X0[order], y0[order]
            row: dict[str, Any] = {"data": key, "n": len(y), "order": seed}
            if args.hac:
                start = time.perf_counter()
                row["hac"] = {
                    "dp": round(dendrogram_purity(run_hac(X), y), 4),
                    "s": round(time.perf_counter() - start, 2),
                }
            for v in args.variants:
                row[v] = _run(VARIANTS[v], X, y)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
