"""What a writer step re-derives as the collection grows (issue #56): counts per step.

Runs ``er ingest FILE`` in this process on the embedded defaults (SQLite and the
embedded FalkorDB in a temporary data dir; batches of ``--batch``, clustered as the
CLI does: eight batches ingested, then clustered in steps of up to
``er.pipeline.lane.GROUP_MAX_MENTIONS`` mentions), with hooks that read MBSCC's state
after every step and change nothing it computes:

- per step: the points the step re-derived (``S``: its new mentions and every mention
  of the floor components holding an old end of a pair the step changed at or above
  the floor or inside one component, ``er.cluster._components.changed_points``), what
  marking every old point of U(0) would have re-derived (the marking before #56: every
  old point sharing a list with a new mention), and whether the bench's own reading
  of the changed pairs (:func:`_marking`) names the product's points; how many floor
  components ``S`` holds and the
  largest, the candidate pairs inside ``S`` at or above the floor (``PAIR_FLOOR``) and
  at or above the entity cut, the components of the pairs at or above the cut ("cut
  components"), the rounds' work (rounds run and the graph entries they read: each
  round of the ``mean`` linkage reads every entry of the contracted graph), the delta's
  rows, the seconds of the step's parts (noisy: the cores are shared) and the batch's
  timings from ``batches.timings``;
- at each ``--snap`` size: the components of the whole candidate graph at several
  thresholds (the floor, then higher), and the largest floor component opened: its
  pairs' probabilities for pairs of one gold person and of two, which fields agree on
  the pairs of two (the stored pair model's comparison levels), and its components
  with the pairs under each threshold dropped.

Generators: ``real-medium`` (``bench/people_real.py --level medium``, the issue's; other
levels as ``real-LEVEL``) and ``people`` (``bench/people.py``, the 1M run's). Stop with
``--limit-s``: the run ends after the step in hand and the figures so far are written.

``--replay EVERY`` then steps the run's MBSCC inputs again on two cores, the product's
and one that marks every old point of U(0) (the marking before #56, exact too), and
compares their deltas after every step and their hierarchies every EVERY steps.
``--summary RAW --snap SIZES`` prints a raw file's figures at sizes (runs before the
marking was built, 2026-11-28, re-derived U(0)'s components and measured the changed
pairs' as ``rederived_if_changed_only``; later runs the other way round,
``rederived_if_all_u0``).

    python -m bench touched --people real-medium --n 300000 \
        --snap 50000 100000 200000 300000 --out bench/raw/touched-2026-11-28.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

sys.path.insert(0, str(Path(__file__).resolve().parent))
from people_real import PEOPLE, people_records

from er.cluster import MBSCC, _components
from er.cluster._graph import knn_lists_graph
from er.cluster._knn_lists import _KnnLists
from er.cluster._params import get_params
from er.cluster._rounds import Agglomerator
from er.evaluation import cut_at_score
from er.match._compare import LADDERS
from er.pipeline import writer
from er.pipeline.config import DEFAULT_PAIR_CUT, PAIR_FLOOR

THRESHOLDS = (PAIR_FLOOR, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5)
PROB_BINS = (PAIR_FLOOR, 0.1, 0.2, 0.3, 0.5, 0.8, 1.0 + 1e-9)


class _Probe:
    """Counters and clocks the hooks fill during one writer step."""

    def __init__(self) -> None:
        self.all_u0 = False  # the replay's second core: every old point of U(0) marked
        self.replaying = False
        self.params: dict[str, Any] = {}  # the run's MBSCC parameters, for the replay
        self.reset()

    def reset(self) -> None:
        self.before: tuple[np.ndarray, np.ndarray] | None = None  # the lists before the step
        self.u0 = np.zeros(0, np.int64)  # U(0) of the step (the lists' add)
        self.marking: dict[str, Any] = {}
        self.seconds: dict[str, float] = {}
        self.probe_s = 0.0  # the hooks' own work inside the writer's cluster_s
        self.rounds = 0
        self.round_entries = 0  # graph entries read by the rounds (W.nnz per round)
        self.round_clusters = 0  # clusters at the start of each round, summed

    def clock(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - started
                self.seconds[name] = self.seconds.get(name, 0.0) + spent

        return timed


PROBE = _Probe()


def _install(on_step: Callable[[Any, Any, list[tuple[str, Any]], dict[str, float]], None]) -> None:
    """Hooks: clocks on the parts of MBSCC's component step and the writer's entity
    step, counters on the rounds, and ``on_step`` after every writer step."""
    merge = Agglomerator.merge

    def counted_merge(self: Agglomerator, *args: Any, **kwargs: Any) -> int:
        PROBE.rounds += 1
        PROBE.round_entries += int(self.W.nnz)
        PROBE.round_clusters += self.n_clusters
        return merge(self, *args, **kwargs)

    Agglomerator.merge = PROBE.clock("rounds", counted_merge)  # type: ignore[method-assign]
    Agglomerator.finish = PROBE.clock("rounds", Agglomerator.finish)  # type: ignore[method-assign]
    forest = _components.Forest
    forest.touched = PROBE.clock("touched_walk", forest.touched)  # type: ignore[method-assign]
    forest.snapshot = PROBE.clock("snapshots", forest.snapshot)  # type: ignore[method-assign]
    forest.set_components = PROBE.clock("set_components", forest.set_components)  # type: ignore[method-assign]
    for name in ("local_graph", "floor_components", "match_ids", "_previous"):
        setattr(_components, name, PROBE.clock(name, getattr(_components, name)))
    writer._entity_step = PROBE.clock("entity_step", writer._entity_step)
    add = _KnnLists.add

    def remembered(self: _KnnLists, *args: Any, **kwargs: Any) -> np.ndarray:
        started = time.perf_counter()
        n0 = self._n  # the old lists, for what the batch changed in them
        PROBE.before = (self._idx[:n0].copy(), self._sim[:n0].copy())
        PROBE.probe_s += time.perf_counter() - started
        marked = add(self, *args, **kwargs)
        PROBE.u0 = np.flatnonzero(marked)
        return marked

    _KnnLists.add = remembered  # type: ignore[method-assign]
    step = PROBE.clock("component_step", _components.step)

    def measured(forest: Any, idx: Any, sim: Any, marked: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        PROBE.marking = _marking(forest, idx, sim, PROBE.u0)
        changed = PROBE.marking.pop("_changed")
        PROBE.marking["marking_as_product"] = bool(np.array_equal(changed, marked))
        PROBE.probe_s += time.perf_counter() - started
        if PROBE.all_u0:  # the marking before #56 (--replay), not the product's
            marked = PROBE.u0
        return step(forest, idx, sim, marked, *args, **kwargs)

    _components.step = measured
    cluster = writer._BatchJob.cluster

    def hooked(
        self: Any, state: Any, rows: list[tuple[str, Any]], found: Any, timings: dict[str, float]
    ) -> Any:
        PROBE.reset()
        write = cluster(self, state, rows, found, timings)
        on_step(self, state, rows, timings)
        return write

    writer._BatchJob.cluster = hooked  # type: ignore[method-assign]


def _record(into: list[tuple[int, int, np.ndarray, np.ndarray]]) -> None:
    """Keep every MBSCC step's input (rows, dimension, the neighbours it was given)."""
    partial_fit = MBSCC.partial_fit

    def kept(self: MBSCC, X: Any, neighbors: Any = None, pair_scores: Any = None) -> MBSCC:
        if neighbors is not None and not PROBE.replaying:
            into.append((X.shape[0], X.shape[1], neighbors[0].copy(), neighbors[1].copy()))
            PROBE.params = get_params(self)
        return partial_fit(self, X, neighbors=neighbors, pair_scores=pair_scores)

    MBSCC.partial_fit = kept  # type: ignore[method-assign]


def _replay(
    inputs: list[tuple[int, int, np.ndarray, np.ndarray]], params: dict[str, Any], every: int
) -> dict[str, Any]:
    """The run's MBSCC steps again on two cores: the product's marking (changed pairs),
    and one that marks every old point of U(0), as before #56; their hierarchies
    (stable ids included) and deltas compared after every step, the whole structures
    and the entities at the cut every ``every`` steps and at the end. Seconds are the
    cores' alone, the hooks' counting left out (noisy)."""
    cores = {"product": MBSCC(**params), "all_u0": MBSCC(**params)}
    rows: list[dict[str, Any]] = []
    same_deltas = same_ids = same_structure = same_entities = True
    checked = 0
    PROBE.replaying = True
    try:
        for i, (b, d, idx, sim) in enumerate(inputs):
            row: dict[str, Any] = {"n": 0}
            for name, core in cores.items():
                PROBE.all_u0 = name == "all_u0"
                PROBE.probe_s = 0.0
                started = time.perf_counter()
                core.partial_fit(np.ones((b, d), np.float32), neighbors=(idx, sim))
                row[f"{name}_s"] = round(time.perf_counter() - started - PROBE.probe_s, 4)
                row[f"{name}_rederived"] = int(core.touched_.points.size)
                row["n"] = int(core._knn._n)
            PROBE.all_u0 = False
            a, c = cores["product"], cores["all_u0"]
            same_deltas &= _same_delta(a.delta_, c.delta_)
            same_ids &= bool(np.array_equal(a.point_ids_, c.point_ids_))
            if (i + 1) % every == 0 or i + 1 == len(inputs):
                checked += 1
                ha, hc = a.hierarchy_, c.hierarchy_
                same_structure &= bool(np.array_equal(a.node_ids_, c.node_ids_))
                same_structure &= _canonical(ha) == _canonical(hc)
                la, lc = cut_at_score(ha, DEFAULT_PAIR_CUT), cut_at_score(hc, DEFAULT_PAIR_CUT)
                same_entities &= bool(np.array_equal(la, lc))
            rows.append(row)
    finally:
        PROBE.replaying = PROBE.all_u0 = False
    return {
        "steps": rows,
        "every_delta_equal": bool(same_deltas),
        "point_ids_equal": bool(same_ids),
        "structures_checked": checked,
        "structure_and_ids_equal": bool(same_structure),
        "entities_at_cut_equal": bool(same_entities),
    }


def _same_delta(a: Any, b: Any) -> bool:
    """The two deltas name the same nodes, attributes and edges (in any order)."""

    def rows(d: Any) -> tuple[Any, ...]:
        order = np.argsort(d.node_id, kind="stable")
        nodes = np.stack(
            [d.node_id[order], d.size[order], d.level_lo[order], d.level_hi[order]], axis=1
        )
        score = np.nan_to_num(np.asarray(d.score, np.float64)[order], nan=-1.0)
        edges = [
            np.unique(np.asarray(e).reshape(-1, 2), axis=0)
            for e in (d.edges_added, d.edges_retired)
        ]
        return (
            nodes.tobytes(),
            score.tobytes(),
            np.sort(d.retired).tobytes(),
            *(e.tobytes() for e in edges),
        )

    return rows(a) == rows(b)


def _canonical(h: Any) -> bytes:
    """Every node as (its point set's hash, size, score, levels), sorted: equal for two
    hierarchies with the same clusters, whatever their node order."""
    M = h.leaf_membership()
    weights = (
        np.random.default_rng(7).integers(1, 2**62, h.n_points, dtype=np.int64).astype(np.uint64)
    )
    vals = weights[M.indices]
    starts = M.indptr[:-1]
    sums = np.zeros(h.n_nodes, np.uint64)
    has = np.diff(M.indptr) > 0
    sums[has] = np.add.reduceat(vals, starts[has])
    score = np.round(np.nan_to_num(np.asarray(h.score, np.float64), nan=-1.0), 9)
    table = np.rec.fromarrays(
        [sums, np.diff(M.indptr), score, h.level_lo, h.level_hi], names="h,s,score,lo,hi"
    )
    return np.sort(table).tobytes()


def _marking(forest: Any, idx: np.ndarray, sim: np.ndarray, marked: np.ndarray) -> dict[str, int]:
    """U(0) (``marked``) taken apart, before the step: the old points it marks, what
    marking them all would re-derive, and the old points whose part of the graph
    changed in a way the hierarchy can see (``changed``: the bench's own reading, from
    a copy of every list, of what the product's ``changed_points`` reads from the lists
    the step rewrote).

    An edge's value is the larger of its two list entries (absent: none). Entries change
    only in the new points' lists and the marked old points', so every pair whose value
    changed is in one of them. A changed pair matters when it lies at or above the floor
    before or after (it joins or splits floor components), or when its two ends are old
    and in one floor component (the mean linkage inside it reads every pair); a pair
    under the floor from a new point to another component changes nothing the rounds
    read. ``S`` with ``changed`` alone: the new points and the floor components of the
    old points ``changed`` names, closed as ``S`` is (no edge at or above the floor
    leaves it)."""
    n0, n = forest.n_points, idx.shape[0]
    assert PROBE.before is not None
    idx0, sim0 = PROBE.before
    old = marked[marked < n0]
    k = idx.shape[1]
    rows = np.r_[old, np.arange(n0, n)]
    a = np.r_[np.repeat(old, k), np.repeat(rows, k)]
    b = np.r_[idx0[old].ravel(), idx[rows].ravel()]
    ok = b >= 0
    a, b = a[ok], b[ok]
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    pairs = np.unique(np.stack([lo, hi], axis=1), axis=0)
    lo, hi = pairs[:, 0], pairs[:, 1]
    before = np.maximum(_entry(idx0, sim0, lo, hi), _entry(idx0, sim0, hi, lo))
    after = np.maximum(_entry(idx, sim, lo, hi), _entry(idx, sim, hi, lo))
    moved = before != after
    both_old = hi < n0
    comp = np.r_[forest.comp[:n0], -1]  # -1: the first batch has no old points
    same = both_old & (comp[np.where(both_old, lo, n0)] == comp[np.where(both_old, hi, n0)])
    matters = moved & ((np.maximum(before, after) >= PAIR_FLOOR) | same)
    ends = np.r_[lo[matters], hi[matters]]
    changed = np.unique(ends[ends < n0])
    return {
        "marked_old": int(old.size),
        "pairs_changed": int(moved.sum()),
        "pairs_changed_that_matter": int(matters.sum()),
        "changed_old": int(changed.size),
        "rederived_if_all_u0": int(_TOUCHED(forest, old, n).size),
        "_changed": changed,  # type: ignore[dict-item]
    }


def _entry(idx: np.ndarray, sim: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(p,) the value of b in a's list (-inf if absent, or a has no list there)."""
    out = np.full(a.size, -np.inf)
    has = a < idx.shape[0]
    rows = a[has]
    hit = idx[rows] == b[has, None]
    found = hit.any(axis=1)
    vals = np.where(hit, sim[rows], -np.inf).max(axis=1)
    out[np.flatnonzero(has)[found]] = vals[found]
    return out


def _graph_of(points: np.ndarray, core: Any) -> sparse.csr_array:
    """The candidate graph among ``points`` (ascending) from their lists, as MBSCC's
    step builds it (the hooks' clock left out)."""
    return _LOCAL_GRAPH(points, core._knn.idx[points], core._knn.sim[points])


_LOCAL_GRAPH = _components.local_graph
_TOUCHED = _components.Forest.touched


def _components_at(G: sparse.csr_array, t: float) -> np.ndarray:
    keep = G.data >= t
    rows = np.repeat(np.arange(G.shape[0]), np.diff(G.indptr))
    H = sparse.csr_array((G.data[keep], (rows[keep], G.indices[keep])), shape=G.shape)
    return np.asarray(csgraph.connected_components(H, directed=False)[1], np.int64)


def _sizes(label: np.ndarray) -> dict[str, Any]:
    counts = np.sort(np.bincount(label))[::-1] if label.size else np.zeros(0, np.int64)
    return {
        "components": int(counts.size),
        "largest": int(counts[0]) if counts.size else 0,
        "top5": counts[:5].tolist(),
        "points_in_over_50": int(counts[counts > 50].sum()),
        "points_in_over_1000": int(counts[counts > 1000].sum()),
    }


def _upper(G: sparse.csr_array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each undirected edge once: (row, col, weight) with row < col."""
    C = G.tocoo()
    up = C.row < C.col
    return C.row[up].astype(np.int64), C.col[up].astype(np.int64), C.data[up].astype(np.float64)


def _step_row(job: Any, state: Any, rows: list[Any]) -> dict[str, Any]:
    core = state.core
    touched = core.touched_
    S = touched.points
    forest = core._forest
    comp = forest.comp[S]
    _, per_comp = np.unique(comp, return_counts=True)
    G = _graph_of(S, core)
    _, _, w = _upper(G)
    cut_label = _components_at(G, DEFAULT_PAIR_CUT)
    cut_sizes = np.bincount(cut_label) if cut_label.size else np.zeros(0, np.int64)
    delta = core.delta_
    return {
        "seq": job.seq,
        "batches": len(job.batches),
        "n": int(state.n_points),
        "new": len(rows),
        "rederived": int(S.size),
        "old_rederived": int(S.size - len(rows)),
        "components": int(per_comp.size),
        "largest": int(per_comp.max(initial=0)),
        "top3": np.sort(per_comp)[::-1][:3].tolist(),
        "edges_in_S": int(w.size),
        "edges_floor": int((w >= PAIR_FLOOR).sum()),
        "edges_cut": int((w >= DEFAULT_PAIR_CUT).sum()),
        "cut_components": int(cut_sizes.size),
        "cut_largest": int(cut_sizes.max(initial=0)),
        **PROBE.marking,
        "rounds": PROBE.rounds,
        "round_entries": PROBE.round_entries,
        "round_clusters": PROBE.round_clusters,
        "delta_nodes": len(delta.node_id),
        "delta_retired": len(delta.retired),
        "delta_edges_added": len(delta.edges_added),
        "delta_edges_retired": len(delta.edges_retired),
        "part_s": {k: round(v, 4) for k, v in sorted(PROBE.seconds.items())},
        "probe_s": round(PROBE.probe_s, 4),
    }


def _snapshot(state: Any, gold: np.ndarray, sample: int, seed: int) -> dict[str, Any]:
    """The whole candidate graph's components at each threshold, and the largest floor
    component opened (what links it); the pairs at or above the floor of the whole graph
    by gold person and probability."""
    core = state.core
    n = int(state.n_points)
    G = knn_lists_graph(core._knn.idx[:n], core._knn.sim[:n])
    row, col, w = _upper(G)
    out: dict[str, Any] = {"n": n, "edges": int(w.size)}
    out["by_threshold"] = {str(t): _sizes(_components_at(G, t)) for t in THRESHOLDS}
    # every pair at or above the floor: of one gold person or of two, by probability;
    # the fields of those of two under the cut (they join no entity but link components)
    at = w >= PAIR_FLOOR
    two = at & (gold[row] != gold[col])
    under = two & (w < DEFAULT_PAIR_CUT)
    out["floor_pairs"] = {
        "bins": list(PROB_BINS[:-1]),
        "same_person": np.histogram(w[at & ~two], PROB_BINS)[0].tolist(),
        "two_people": np.histogram(w[two], PROB_BINS)[0].tolist(),
        "two_people_under_cut_fields": _fields(
            state, row[under], col[under], w[under], sample, seed
        ),
    }
    floor = _components_at(G, PAIR_FLOOR)
    big = int(np.argmax(np.bincount(floor)))
    members = np.flatnonzero(floor == big)
    inside = (floor[row] == big) & (w >= PAIR_FLOOR)
    r, c, p = row[inside], col[inside], w[inside]
    cross = gold[r] != gold[c]
    hist = {
        "bins": list(PROB_BINS[:-1]),
        "same_person": np.histogram(p[~cross], PROB_BINS)[0].tolist(),
        "two_people": np.histogram(p[cross], PROB_BINS)[0].tolist(),
    }
    # the component with the pairs under t dropped, and with the pairs of two people
    # under the cut dropped (an oracle: what the bridges of two people hold together)
    sub = G[members][:, members]
    split = {str(t): _sizes(_components_at(sub, t)) for t in THRESHOLDS[1:]}
    g = gold[members]
    S = sub.tocoo()
    keep = (S.data >= DEFAULT_PAIR_CUT) | (g[S.row] == g[S.col])
    oracle = sparse.csr_array((S.data[keep], (S.row[keep], S.col[keep])), shape=sub.shape)
    people = np.unique(g).size
    out["largest_floor_component"] = {
        "points": int(members.size),
        "gold_people": int(people),
        "edges_floor": int(p.size),
        "edges_two_people": int(cross.sum()),
        "edges_two_people_under_cut": int((cross & (p < DEFAULT_PAIR_CUT)).sum()),
        "edges_one_person_under_cut": int((~cross & (p < DEFAULT_PAIR_CUT)).sum()),
        "probabilities": hist,
        "without_pairs_under": split,
        "without_two_people_pairs_under_cut": _sizes(_components_at(oracle, PAIR_FLOOR)),
        "two_people_fields": _fields(state, r[cross], c[cross], p[cross], sample, seed),
    }
    return out


def _fields(
    state: Any, left: np.ndarray, right: np.ndarray, prob: np.ndarray, sample: int, seed: int
) -> dict[str, Any]:
    """Which fields agree on pairs of two people (a seeded sample): per field, the share
    of pairs at each comparison level; the commonest patterns of fields at their top two
    levels ('close' or 'exact'); a few pairs explained by the stored model."""
    model, table = state.model, state.table
    rng = np.random.default_rng(seed)
    pick = rng.choice(left.size, size=min(sample, left.size), replace=False)
    a, b, p = left[pick], right[pick], prob[pick]
    weights, levels = model.weights(table, a, b)
    per_field = {}
    agree = np.zeros(levels.shape, bool)
    for f, fw in enumerate(model.fields):
        names = LADDERS[fw.kind].names
        counts = np.bincount(levels[:, f], minlength=len(names))
        per_field[fw.name] = {
            "levels": {
                names[i]: round(float(counts[i]) / max(a.size, 1), 3) for i in range(len(names))
            },
            "mean_bits": round(float(weights[:, f].mean()), 2) if a.size else None,
        }
        agree[:, f] = levels[:, f] >= len(names) - 2
    patterns: dict[str, list[float]] = {}
    names = [fw.name for fw in model.fields]
    for row, q in zip(agree, p, strict=True):
        key = "+".join(n for n, on in zip(names, row, strict=True) if on) or "(none)"
        patterns.setdefault(key, []).append(float(q))
    top = sorted(patterns.items(), key=lambda kv: -len(kv[1]))[:12]
    examples = []
    for i in range(min(5, a.size)):
        e = model.explain(table, int(a[i]), int(b[i]))
        examples.append(
            {
                "probability_scored": round(float(p[i]), 3),
                "fields": {
                    x["field"]: [x["a"], x["b"], x["level"], round(x["weight"], 2)]
                    for x in e["fields"]
                },
            }
        )
    return {
        "sampled": int(a.size),
        "of": int(left.size),
        "per_field": per_field,
        "patterns_close_or_exact": [
            {"fields": k, "pairs": len(v), "median_p": round(float(np.median(v)), 3)}
            for k, v in top
        ],
        "examples": examples,
    }


def _commit() -> str | None:
    """The commit of the er this run imported, when it is a git checkout."""
    import subprocess

    import er

    where = Path(er.__file__).resolve().parent
    done = subprocess.run(
        ["git", "-C", str(where), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() or None if done.returncode == 0 else None


def _batch_timings(url: str) -> dict[int, dict[str, float]]:
    from sqlalchemy import create_engine, select
    from sqlalchemy.orm import Session

    from er.stores.sql import Batch

    engine = create_engine(url)
    with Session(engine) as s:
        out = {seq: t for seq, t in s.execute(select(Batch.seq, Batch.timings)).all() if t}
    engine.dispose()
    return out


def summary(raw: dict[str, Any], sizes: list[int], width: int = 5) -> list[dict[str, Any]]:
    """Per size: the means over the ``width`` steps nearest it, per step of ``batches``
    batches; seconds per batch from ``batches.timings`` less the hooks' own
    (``probe_s``); ``joining``: the share of the steps' new mentions with an earlier
    mention of their gold person (the records drawn again from the generator)."""
    from bench_e2e import _joining

    from er.pipeline import writer_seconds

    seed = raw.get("seed")
    joining = _joining(people_records(raw["people"], raw["n"], seed=seed))
    steps = [s for s in raw["steps"] if s.get("batch_timings")]
    # the other marking's count: U(0)'s since the marking was built, before it the remedy's
    other = "rederived_if_all_u0" if steps and "rederived_if_all_u0" in steps[0] else None
    other = other or "rederived_if_changed_only"
    ends = np.array([s["n"] for s in steps])
    out = []
    for at in sizes:
        near = [steps[i] for i in np.argsort(np.abs(ends - at), kind="stable")[:width]]

        def mean(get: Callable[[dict[str, Any]], float], near: list[Any] = near) -> float:
            return round(float(np.mean([get(s) for s in near])), 3)

        def own(s: dict[str, Any], stages: tuple[str, ...] | None = None) -> float:
            t = s["batch_timings"]
            spent = writer_seconds(t) if stages is None else sum(t.get(k, 0.0) for k in stages)
            return float(spent - s["probe_s"] / s["batches"])

        out.append(
            {
                "n": at,
                "new_per_step": mean(lambda s: s["new"]),
                "joining": mean(lambda s: joining[s["n"] - s["new"] : s["n"]].mean()),
                "rederived": mean(lambda s: s["rederived"]),
                other: mean(lambda s: s[other]),
                "components": mean(lambda s: s["components"]),
                "largest": max(s["largest"] for s in near),
                "edges_in_S": mean(lambda s: s["edges_in_S"]),
                "edges_floor": mean(lambda s: s["edges_floor"]),
                "round_entries": mean(lambda s: s["round_entries"]),
                "marked_old": mean(lambda s: s["marked_old"]),
                "changed_old": mean(lambda s: s["changed_old"]),
                "delta_nodes": mean(lambda s: s["delta_nodes"]),
                "writer_s_per_batch": mean(own),
                "cluster_s_per_batch": mean(lambda s: own(s, ("cluster_s",))),
                "graph_s_per_batch": mean(lambda s: s["batch_timings"].get("graph_s", 0.0)),
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--people",
        choices=PEOPLE,
        default="real-medium",
        help="real-LEVEL: bench/people_real.py at that level; people: bench/people.py",
    )
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=1_000)
    ap.add_argument("--seed", type=int, default=None, help="default: the generator's own")
    ap.add_argument("--snap", type=int, nargs="*", default=[50_000, 100_000])
    ap.add_argument("--sample", type=int, default=5_000, help="pairs of two people opened")
    ap.add_argument("--limit-s", type=float, default=None)
    ap.add_argument("--out", type=Path, default=None, help="also add the run to this file's runs")
    ap.add_argument(
        "--replay",
        type=int,
        default=0,
        metavar="EVERY",
        help="then replay the MBSCC steps marking every old point of U(0) (before #56) "
        "against the product's (structures compared every EVERY steps); 0: no replay",
    )
    ap.add_argument(
        "--summary",
        type=Path,
        default=None,
        metavar="RAW",
        help="print the figures of each run of a raw file at --snap sizes; no run",
    )
    args = ap.parse_args()
    if args.summary is not None:
        for run in json.loads(args.summary.read_text())["runs"]:
            for row in summary(run, args.snap):
                print(json.dumps({"people": run["people"], "er": run.get("er"), **row}))
        return
    records = people_records(args.people, args.n, seed=args.seed)
    entity_of = {r["rec_id"]: r["entity"] for r in records}
    codes: dict[str, int] = {}
    gold: list[int] = []  # gold person of each point, in the writer's order
    steps: list[dict[str, Any]] = []
    snaps: list[dict[str, Any]] = []
    todo = sorted(args.snap)
    started = time.perf_counter()

    class Stop(BaseException):  # not an Exception: the writer would fail the batch
        pass

    def on_step(job: Any, state: Any, rows: list[Any], timings: dict[str, float]) -> None:
        gold.extend(codes.setdefault(entity_of[ext], len(codes)) for ext, _ in rows)
        steps.append(_step_row(job, state, rows))
        last = steps[-1]
        print(
            f"n={last['n']} S={last['rederived']} U0={last['rederived_if_all_u0']} "
            f"largest={last['largest']} "
            f"edges={last['edges_floor']} comps={last['components']} "
            f"cluster_s={timings.get('cluster_s', 0):.2f}",
            file=sys.stderr,
            flush=True,
        )
        while todo and state.n_points >= todo[0]:
            todo.pop(0)
            snaps.append(_snapshot(state, np.asarray(gold), args.sample, 0))
        if args.limit_s is not None and time.perf_counter() - started > args.limit_s:
            raise Stop

    _install(on_step)
    inputs: list[tuple[int, int, np.ndarray, np.ndarray]] = []
    if args.replay:
        _record(inputs)
    from er.cli.main import main as er_main

    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        data = Path(tmp) / "data"
        for key in [k for k in os.environ if k.startswith("ER_")]:
            del os.environ[key]
        os.environ["ER_DATA_DIR"] = str(data)
        path = Path(tmp) / "people.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        del records
        argv = ["ingest", str(path), "--collection", "people", "--id-field", "rec_id"]
        argv += ["--gold-field", "entity", "--batch-size", str(args.batch)]
        stopped = False
        try:
            er_main(argv)
        except Stop:
            stopped = True
        wall = time.perf_counter() - started
        timings = _batch_timings(f"sqlite:///{(data / 'er.sqlite3').resolve()}")
        from er.pipeline.stores import close_stores

        close_stores()  # the embedded graph database, before its directory goes
    replay = _replay(inputs, PROBE.params, args.replay) if args.replay else None
    for row in steps:  # each batch of the step stored the step's timings over its count
        row["batch_timings"] = timings.get(row["seq"])
    out = {
        "people": args.people,
        "n": args.n,
        "seed": args.seed,
        "batch": args.batch,
        "floor": PAIR_FLOOR,
        "cut": DEFAULT_PAIR_CUT,
        "stopped_at": steps[-1]["n"] if stopped and steps else None,
        "er": _commit(),
        "wall_s": round(wall, 1),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, "
        f"Python {platform.python_version()}",
        "load_at_end": [round(x, 2) for x in os.getloadavg()],
        "steps": steps,
        "snapshots": snaps,
        "replay": replay,
    }
    if args.out is not None:  # one file holds several runs
        runs = json.loads(args.out.read_text())["runs"] if args.out.exists() else []
        args.out.write_text(json.dumps({"runs": [*runs, out]}, separators=(",", ":")) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
