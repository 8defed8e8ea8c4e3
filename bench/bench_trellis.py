"""The cluster trellis: time and peak memory for n = 8..16, and its peers.

    python bench/bench_trellis.py [--sizes 8 10 12 14 16] [--seed 0]

For each n: build the trellis (log Z and MAP of every subset; O(3^n)), the top-down
outside pass that every cluster marginal needs, and the MAP energy next to the two
approximate peers the paper compares with (§4.1, Table 1): average-linkage HAC
(scipy) and an agglomerative beam search (width 5), all scored by the same energy
(Gibbs average linkage, beta 5, on cosine similarities of seeded 16-d Gaussian
points). Then the cost of one entity-confidence question at 12 mentions: trellis,
outside pass, the entity's cluster marginal and one pair's LCA probability.
Peak memory is numpy's allocations as tracemalloc sees them.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import tracemalloc

import numpy as np
from scipy.cluster.hierarchy import linkage

from er.cluster._trellis import average_linkage, build_trellis

BETA = 5.0


def _points(n: int, seed: int) -> np.ndarray:
    X = np.random.default_rng(seed).normal(size=(n, 16))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X @ X.T


def _hac(S: np.ndarray) -> list[int]:
    n = S.shape[0]
    Z = linkage(np.clip(1.0 - S[np.triu_indices(n, 1)], 0, None), method="average")
    masks = [1 << i for i in range(n)]
    for a, b, *_ in Z:
        masks.append(masks[int(a)] | masks[int(b)])
    return masks


def _beam(trellis, n: int, width: int = 5) -> float:  # type: ignore[no-untyped-def]
    beam = [(0.0, tuple(1 << i for i in range(n)))]
    for _ in range(n - 1):
        nxt: dict[tuple[int, ...], float] = {}
        for score, parts in beam:
            a_idx, b_idx = np.triu_indices(len(parts), 1)
            p = np.array(parts)
            e = trellis.log_energy(p[a_idx], p[b_idx])
            for x, y, ev in zip(a_idx, b_idx, e, strict=True):
                rest = [q for k, q in enumerate(parts) if k not in (x, y)]
                key = tuple(sorted([*rest, parts[x] | parts[y]]))
                nxt[key] = max(nxt.get(key, -np.inf), score + float(ev))
        beam = sorted(((s, k) for k, s in nxt.items()), reverse=True)[:width]
    return beam[0][0]


def _timed(fn):  # type: ignore[no-untyped-def]
    tracemalloc.start()
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, seconds, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[8, 10, 12, 14, 16])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cmd = "python bench/bench_trellis.py " + " ".join(sys.argv[1:])
    print(
        f"# machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
        f"python {platform.python_version()}; command: `{cmd.strip()}`"
    )
    print()
    print(
        "| n | hierarchies (2n-3)!! | build s | outside pass s | peak MB | "
        "log E(MAP) | log E(beam-5) | log E(HAC avg) | log Z |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        S = _points(n, args.seed + n)
        trellis, build_s, peak = _timed(lambda S=S: build_trellis(S, energy="average", beta=BETA))
        _, out_s, out_peak = _timed(trellis.log_outside)
        best = float(trellis.log_map[trellis.full])
        hac = trellis.energy_of(_hac(S))
        beam = _beam(trellis, n) if n <= 14 else float("nan")
        count = float(np.prod(np.arange(2 * n - 3, 0, -2, dtype=np.float64)))
        print(
            f"| {n} | {count:.3g} | {build_s:.2f} | {out_s:.2f} | "
            f"{max(peak, out_peak) / 2**20:.1f} | {best:.3f} | {beam:.3f} | {hac:.3f} | "
            f"{trellis.log_partition:.3f} |"
        )
    S = _points(12, args.seed)

    def confidence() -> tuple[float, float]:
        """What `er query confidence` computes: P(entity) and every pair's P(one entity
        at the cut), here cut 0.45 as the product's default."""
        trellis = build_trellis(S, energy="average", beta=BETA)
        out = trellis.log_outside()
        members = list(range(8))  # the entity; the other 4 are its nearest outsiders
        pairs = trellis.together_at_cut(average_linkage(S), 0.45, out)
        return trellis.cluster_marginal(members, out), float(pairs[0, 1])

    (p_entity, p_pair), secs, peak = _timed(confidence)
    print()
    print(
        f"Entity confidence, 12 mentions (8 in the entity + 4 nearest outside): "
        f"{secs:.2f} s, peak {peak / 2**20:.1f} MB (P(entity)={p_entity:.3f}, "
        f"P(items 0 and 1 in one entity at cut 0.45)={p_pair:.3f})"
    )


if __name__ == "__main__":
    main()
