"""One collection split into parts, each clustered by its own writer process in its
own network namespace (docs/sharding.md, issue #56 must-show 4): entities and entity
ids against one writer's, and what the coordination costs.

    python -m bench parts --n 100000 --batch 1000 --parts 2 4 --json out.jsonl

The router (this process) does what the design gives the ingest processes and the
shared key table: it normalises, featurizes and keys each record
(``er.pipeline.features``), finds its candidates among every earlier record (blocking
keys ranked by cosine, the writer's own search), scores them with one pair model, and
routes. A floor component (candidate pairs scored at or above ``PAIR_FLOOR``) lives in
one part; a batch whose floor pairs reach components of two parts joins them, and every
component outside the part holding most of the joined mentions moves there: its
mentions, their normalised values, their floor pairs and their entities (ids and all)
leave the old writer and arrive with the batch at the new one.

Each writer keeps an MBSCC core with the pipeline's parameters over its own mentions and
its own entity ledger (``er.entities.ArrayLedger``), minting ids from its own block.
Its core also holds a stand-in point for each mention of another part that its lists
reach or whose list reaches its mentions (``PartWriter``): a pair under the floor
never merges, but it takes a slot of a k-NN list (a list keeps its best k), so the one
writer's lists are kept only if every part sees the pairs that reach its mentions from
the others.

The pair model is trained once on the stream's first ``--train`` records
(``train_on_collection``, as the writer's retraining at 10,000 mentions) and kept for
the run: a new model rescoring every part's lists is a collection-wide step the
design still has to place (docs/sharding.md). Each pair's prior is the collection's
after its batch, as the writer scores it.

After every batch the parts' entities are compared with the one writer's: the same
partition of the mentions, and over the whole run one id of the parts for each id of
the one writer (a move or a join that renamed an entity breaks that).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import multiprocessing as mp
import os
import platform
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))

from people_real import PEOPLE, people_records

from er.ann import Int8Rows, KeyIndex
from er.entities import ArrayLedger
from er.evaluation import bcubed, cut_at_score, pairwise_prf
from er.match import FieldTable, PairModel
from er.pipeline.config import PAIR_FLOOR, _make_core, new_collection_config
from er.pipeline.features import make_features
from er.pipeline.scores import candidate_scores, model_scores
from er.pipeline.train import train_on_collection

CLONE_NEWNET = 0x40000000
ID_BLOCK = 10**9  # a part's entity ids start at part * ID_BLOCK + 1


# -- the writer of one part ----------------------------------------------------------------
@dataclass
class Lists:
    """Mentions and their k-NN lists in global mention ids (-1 for none)."""

    mentions: NDArray[np.int64]  # (m,)
    idx: NDArray[np.int64]  # (m, k)
    sim: NDArray[np.float32]  # (m, k)


@dataclass
class Moved:
    """What a component's move carries from one part to another (docs/sharding.md)."""

    lists: Lists  # its mentions and their lists as the old writer's core holds them
    entities: NDArray[np.int64]  # (m,) their entity ids
    rows: list[list[str | None]]  # (m, fields) normalised values


@dataclass
class Step:
    """One part's share of a batch: the components moving in, the new mentions routed
    here, and the other parts' new mentions whose lists reach this part's mentions."""

    batch: int
    new: Lists
    rows: list[list[str | None]]  # (b, fields) the new mentions' values
    carriers: Lists  # other parts' new mentions, their list entries in this part alone
    moved: list[Moved] = field(default_factory=list)


class PartWriter:
    """A part's writer: its MBSCC core, field table and entity ledger.

    Besides its own mentions the core holds a **stand-in** point for each mention of
    another part that a list here reaches or that reaches a list here: a list pair
    under the floor never merges (MBSCC ``tau_min``), but it fills a slot of the list,
    so the one writer's lists (each point's best k of every pair that reached it, whose
    pairs inside a component, under the floor too, count in its mean linkage) are kept
    only if each part's lists see the other parts' pairs too. A stand-in's pairs all lie
    under the floor (a pair at or above it puts both mentions in one component, so one
    part); it stays a cluster of its own and is no mention of the ledger.
    """

    def __init__(self, part: int, config: dict[str, Any], model_json: dict[str, Any]) -> None:
        self.core = _make_core(config["algorithm"], dict(config["params"]))
        self.k = int(self.core.k)
        self.cut = float(config["cut_threshold"])
        self.table = FieldTable(list(config["field_types"]))
        self.model = PairModel.from_json(model_json)
        self.ledger = ArrayLedger(next_id=part * ID_BLOCK + 1)
        self.global_of = np.zeros(0, np.int64)  # point -> mention (-1 - mention: stand-in)
        self.local_of: dict[int, int] = {}  # own mention -> point
        self.stand_in: dict[int, int] = {}  # another part's mention -> point
        self.seconds: dict[str, float] = defaultdict(float)

    def step(self, s: Step) -> None:
        """The moved components first, as old points here (so that the batch's pairs
        enter their lists as they would have at the old writer), then the batch."""
        t0 = time.process_time()
        if s.moved:  # every component moving here in one step of the core
            self._move_in(
                Moved(
                    Lists(
                        np.concatenate([m.lists.mentions for m in s.moved]),
                        np.concatenate([m.lists.idx for m in s.moved]),
                        np.concatenate([m.lists.sim for m in s.moved]),
                    ),
                    np.concatenate([m.entities for m in s.moved]),
                    [r for m in s.moved for r in m.rows],
                )
            )
        t1 = time.process_time()
        self._add(s.new, s.rows, s.carriers)
        self.seconds["move_in_s"] += t1 - t0
        self.seconds["step_s"] += time.process_time() - t1

    def _points(self, ids: NDArray[np.int64], first: int, made: list[int]) -> NDArray[np.int64]:
        """(m, k) points of global ids (-1 stays). An unknown mention gets a stand-in at
        point ``first + len(made)`` and is appended to ``made`` (:meth:`_append` adds
        the points)."""
        out = np.full(ids.shape, -1, np.int64)
        ok = ids >= 0
        for pos, g in zip(np.flatnonzero(ok).tolist(), ids[ok].tolist(), strict=True):
            point = self.local_of.get(g)
            if point is None:
                point = self.stand_in.get(g)
            if point is None:
                point = self.stand_in[g] = first + len(made)
                made.append(g)
            out.flat[pos] = point
        return out

    def _append(self, points: NDArray[np.int64], rows: list[Any], made: list[int]) -> int:
        """Add ``points`` (mentions, or -1 - mention for stand-ins) with their values,
        then the stand-ins ``made``, valueless; the number of those."""
        extra = len(made)
        self.global_of = np.r_[self.global_of, points, -1 - np.array(made, np.int64)]
        self.table.add(rows + [[None] * len(self.table.fields)] * (points.size - len(rows) + extra))
        return extra

    def _add(self, new: Lists, rows: list[Any], carriers: Lists) -> None:
        """Step the core on the new mentions, the carriers (stand-ins of other parts' new
        mentions, whose lists enter the lists here) and stand-ins for other mentions the
        lists reach; step the ledger on what the core redid."""
        first = self.global_of.size
        b, c = new.mentions.size, carriers.mentions.size
        self.local_of.update((g, first + i) for i, g in enumerate(new.mentions.tolist()))
        self.stand_in.update((g, first + b + i) for i, g in enumerate(carriers.mentions.tolist()))
        made: list[int] = []
        idx = np.r_[
            self._points(new.idx, first + b + c, made),
            self._points(carriers.idx, first + b + c, made),
        ]
        extra = self._append(np.r_[new.mentions, -1 - carriers.mentions], rows, made)
        idx = np.r_[idx, np.full((extra, idx.shape[1]), -1, np.int64)]
        sim = np.r_[new.sim, carriers.sim, np.zeros((extra, idx.shape[1]), np.float32)]
        self._fit(idx, np.where(idx >= 0, sim, 0).astype(np.float32))

    def _fit(self, idx: NDArray[np.int64], sim: NDArray[np.float32]) -> None:
        table, model = self.table, self.model

        def against(left: NDArray[np.int64], right: NDArray[np.int64]) -> NDArray[np.float64]:
            return model.against(table, left, right)

        X = np.zeros((idx.shape[0], 1), np.float32)  # given lists, the core keeps no vectors
        self.core.partial_fit(X, neighbors=(idx, sim), pair_scores=against)
        part = self.core.touched_
        label = cut_at_score(part.hierarchy, self.cut)
        mention = self.global_of[part.points]
        own = mention >= 0
        self.ledger.step_part(self.ledger.last_batch + 1, mention[own], label[own])

    def _move_in(self, moved: Moved) -> None:
        """A component arrives: its mentions enter the ledger with their entities and the
        core with their lists, and the lists here that held their stand-ins hold them."""
        m = moved.lists.mentions
        mention = np.r_[self.ledger.mention_, m]
        entity = np.r_[self.ledger.entity_, moved.entities]
        order = np.argsort(mention, kind="stable")
        self.ledger.mention_, self.ledger.entity_ = mention[order], entity[order]
        first = self.global_of.size
        was = {g: self.stand_in.pop(g) for g in m.tolist() if g in self.stand_in}
        self.local_of.update((g, first + i) for i, g in enumerate(m.tolist()))
        made: list[int] = []
        idx = self._points(moved.lists.idx, first + m.size, made)
        extra = self._append(m, moved.rows, made)
        # the component's own lists enter without touching the lists here (their pairs
        # to this part's mentions are already there, through the stand-ins)
        inside = (idx >= first) & (idx < first + m.size)
        given = np.r_[np.where(inside, idx, -1), np.full((extra, self.k), -1, np.int64)]
        self._fit(
            given,
            np.where(given >= 0, np.r_[moved.lists.sim, np.zeros((extra, self.k), np.float32)], 0),
        )
        knn = self.core._knn  # a move sets lists directly: MBSCC has no reader or writer
        knn.idx[first : first + m.size] = idx
        knn.sim[first : first + m.size] = np.where(idx >= 0, moved.lists.sim, -np.inf)
        if was:
            t0 = time.process_time()
            old = np.array(list(was.values()), np.int64)
            knn.idx[old], knn.sim[old] = -1, -np.inf  # the stand-ins' own reverse pairs
            now = np.array([self.local_of[g] for g in was], np.int64)
            remap = np.arange(self.global_of.size)
            remap[old] = now
            held = knn.idx[:first]
            hit = held >= 0
            held[hit] = remap[held[hit]]
            # one pass over the part's lists per move; a build would index the lists
            # that hold each stand-in
            self.seconds["remap_s"] += time.process_time() - t0

    def floor_pairs_off_part(self) -> int:
        """List pairs at or above the floor with a stand-in at either end: none, if every
        floor component lies whole in one part."""
        knn = self.core._knn
        idx, sim = knn.idx, knn.sim
        floor = (idx >= 0) & (sim >= PAIR_FLOOR)
        rows = np.broadcast_to(np.arange(idx.shape[0])[:, None], idx.shape)
        own = self.global_of >= 0
        return int((floor & ~(own[rows] & own[np.where(floor, idx, 0)])).sum())

    def export(self, mentions: NDArray[np.int64]) -> Moved:
        """Hand a component over: its mentions leave the ledger with their entities,
        values and lists; their points stay here as stand-ins."""
        t0 = time.process_time()
        mentions = np.sort(mentions)
        pos = np.searchsorted(self.ledger.mention_, mentions)
        entities = self.ledger.entity_[pos].copy()
        stay = np.ones(self.ledger.mention_.size, bool)
        stay[pos] = False
        self.ledger.mention_ = self.ledger.mention_[stay]
        self.ledger.entity_ = self.ledger.entity_[stay]
        local = np.array([self.local_of.pop(g) for g in mentions.tolist()], np.int64)
        self.stand_in.update(zip(mentions.tolist(), local.tolist(), strict=True))
        rows = [list(self.table.values(int(i)).values()) for i in local]
        knn = self.core._knn  # a move reads lists directly: MBSCC has no reader
        idx, sim = knn.idx[local].copy(), knn.sim[local].copy()
        # their points stay as stand-ins, with no pairs of their own left: a stand-in's
        # pairs lie under the floor, and these would join them again on a re-derivation
        knn.idx[local], knn.sim[local] = -1, -np.inf
        ok = idx >= 0
        g = self.global_of[idx[ok]]
        idx[ok] = np.where(g >= 0, g, -1 - g)
        self.global_of[local] = -1 - mentions
        self.seconds["move_out_s"] += time.process_time() - t0
        return Moved(Lists(mentions, idx, sim), entities, rows)


def _serve(part: int, conn: Connection, config: dict[str, Any], model: dict[str, Any]) -> None:
    """A writer process: its own network namespace, then requests until ``None``."""
    libc = ctypes.CDLL(None, use_errno=True)
    isolated = libc.unshare(CLONE_NEWNET) == 0
    writer = PartWriter(part, config, model)
    conn.send({"netns": os.readlink("/proc/self/ns/net"), "isolated": isolated})
    while (msg := conn.recv()) is not None:
        kind, arg = msg
        if kind == "step":
            writer.step(arg)
            conn.send(None)
        elif kind == "export":
            conn.send(writer.export(arg))
        elif kind == "entities":
            conn.send((writer.ledger.mention_, writer.ledger.entity_))
        elif kind == "floor_pairs_off_part":
            conn.send(writer.floor_pairs_off_part())
        elif kind == "seconds":
            own = len(writer.local_of)
            points = {"points": int(writer.global_of.size), "own": own}
            conn.send({**writer.seconds, "cpu_s": time.process_time(), **points})


# -- the router ------------------------------------------------------------------------------
class Components:
    """Floor components of the mentions so far (union-find), each with its part."""

    def __init__(self) -> None:
        self.parent: list[int] = []
        self.members: dict[int, list[int]] = {}
        self.part: dict[int, int] = {}

    def find(self, a: int) -> int:
        parent = self.parent
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def add(self, n: int) -> None:
        start = len(self.parent)
        self.parent.extend(range(start, start + n))
        self.members.update((i, [i]) for i in range(start, start + n))

    def union(self, a: int, b: int) -> int:
        a, b = self.find(a), self.find(b)
        if a == b:
            return a
        if len(self.members[a]) < len(self.members[b]):
            a, b = b, a
        self.parent[b] = a
        self.members[a].extend(self.members.pop(b))
        self.part.pop(b, None)
        return a


@dataclass
class Routed:
    """A batch's routing: each new mention's part and the components that move."""

    part: NDArray[np.int64]  # (b,)
    moves: list[tuple[int, int, NDArray[np.int64]]]  # (from part, to part, mentions)


def route(
    comps: Components,
    first: int,
    idx: NDArray[np.int64],
    sim: NDArray[np.float32],
    loads: list[int],
) -> Routed:
    """Join the batch's floor pairs into components and give each its part: the part
    holding most of its old mentions (ties to the lower part; a new component to the
    part with the fewest mentions); the old components in other parts move there.

    Parameters
    ----------
    first : int
        Global id of the batch's first mention (the batch is ``first .. first + b - 1``).
    idx, sim : ndarray, shape (b, k)
        The batch's candidates (global ids, -1 for none) and their probabilities.
    loads : list of int
        Mentions per part, updated.
    """
    b = idx.shape[0]
    comps.add(b)
    rows, cols = np.nonzero((idx >= 0) & (sim >= PAIR_FLOOR))
    ends = idx[rows, cols]
    old_root = {j: comps.find(j) for j in np.unique(ends[ends < first]).tolist()}
    olds = {r: np.array(comps.members[r], np.int64) for r in set(old_root.values())}
    parts = {r: comps.part.pop(r) for r in olds}
    for r, j in zip(rows.tolist(), ends.tolist(), strict=True):
        comps.union(first + r, j)
    joined: dict[int, set[int]] = defaultdict(set)
    for j, r in old_root.items():
        joined[comps.find(j)].add(r)
    part = np.full(b, -1, np.int64)
    moves = []
    for i in range(b):
        root = comps.find(first + i)
        if root not in comps.part:
            held: dict[int, int] = defaultdict(int)
            for r in joined[root]:
                held[parts[r]] += olds[r].size
            candidates = held or {p: -loads[p] for p in range(len(loads))}
            target = min(candidates, key=lambda p: (-candidates[p], p))
            for r in sorted(joined[root]):
                if parts[r] != target:
                    moves.append((parts[r], target, olds[r]))
                    loads[parts[r]] -= olds[r].size
                    loads[target] += olds[r].size
            comps.part[root] = target
        part[i] = comps.part[root]
        loads[int(part[i])] += 1
    return Routed(part, moves)


@dataclass
class Stream:
    """The router's state: features, candidates and scores of the mentions so far."""

    config: dict[str, Any]
    model: PairModel
    k: int
    table: FieldTable = field(init=False)
    rows_index: Int8Rows | None = None
    keys: KeyIndex | None = None
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def __post_init__(self) -> None:
        self.table = FieldTable(list(self.config["field_types"]))

    def batch(
        self, records: Sequence[dict[str, str]]
    ) -> tuple[list[Any], NDArray[np.int64], NDArray[np.float32]]:
        """Normalised rows, (b, k) candidates (global ids) and their probabilities."""
        t0 = time.process_time()
        made = make_features(self.config, [(r[self.config["id_field"]], r) for r in records])
        assert made.rows is not None and made.keys is not None
        t1 = time.process_time()
        if self.rows_index is None:
            self.rows_index, self.keys = Int8Rows(made.X.shape[1]), KeyIndex(made.keys.shape[1])
        assert self.keys is not None
        self.rows_index.add(made.X)
        idx, _ = self.rows_index.rank(
            made.X, self.keys.candidates(self.keys.add(made.keys)), self.k
        )
        t2 = time.process_time()
        first = len(self.table)
        self.table.add(made.rows)
        # the writer's scores: equal ones nudged apart by their pair where the config
        # says so (er.pipeline.scores), by global mention ids, the same in every part
        scores = model_scores(self.model, self.table, len(self.table), self.config)
        sim = candidate_scores(scores, idx, first)
        t3 = time.process_time()
        for name, s in (("features_s", t1 - t0), ("search_s", t2 - t1), ("score_s", t3 - t2)):
            self.seconds[name] += s
        return made.rows, idx, sim


def trained_model(config: dict[str, Any], records: Sequence[dict[str, str]]) -> PairModel:
    """The model the run scores with: trained on ``records`` as the writer retrains."""
    made = make_features(config, [(r[config["id_field"]], r) for r in records])
    assert made.rows is not None
    table = FieldTable(list(config["field_types"]))
    table.add(made.rows)
    return train_on_collection(table, config, made.X, version=1)


# -- a run -----------------------------------------------------------------------------------
@dataclass
class Check:
    """The parts' entities against the one writer's, batch by batch."""

    reference: list[NDArray[np.int64]]  # per batch: (n,) entity of each mention
    ids: dict[int, int] = field(default_factory=dict)  # parts' id -> one writer's
    back: dict[int, int] = field(default_factory=dict)
    partition_differs: int = 0
    id_conflicts: int = 0
    differing_mentions: int = 0  # at the last batch checked

    def batch(self, t: int, ours: NDArray[np.int64]) -> None:
        ref = self.reference[t]
        pairs, inverse = np.unique(np.stack([ours, ref], 1), axis=0, return_inverse=True)
        split = _repeated(pairs[:, 0]) | _repeated(pairs[:, 1])
        self.differing_mentions = int(split[inverse.reshape(-1)].sum())
        if split.any():
            self.partition_differs += 1
            return
        for a, r in pairs.tolist():
            if self.ids.setdefault(a, r) != r or self.back.setdefault(r, a) != a:
                self.id_conflicts += 1


def _repeated(values: NDArray[np.int64]) -> NDArray[np.bool_]:
    """(p,) True where the value occurs more than once."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    out: NDArray[np.bool_] = counts[inverse.reshape(-1)] > 1
    return out


def _step(
    batch: int,
    part: int,
    first: int,
    rows: list[Any],
    idx: NDArray[np.int64],
    sim: NDArray[np.float32],
    where: NDArray[np.int64],
) -> Step:
    """A part's share of a batch: its new mentions with their whole lists, and the
    other parts' new mentions whose lists reach its old mentions, with those entries."""
    mine = where[first : first + idx.shape[0]] == part
    ok = idx >= 0
    here = ok & (idx < first) & (where[np.where(ok, idx, 0)] == part)
    carry = ~mine & here.any(axis=1)
    new = Lists(first + np.flatnonzero(mine), idx[mine], sim[mine])
    cidx = np.where(here, idx, -1)[carry]
    carriers = Lists(first + np.flatnonzero(carry), cidx, np.where(cidx >= 0, sim[carry], 0))
    return Step(batch, new, [rows[i] for i in np.flatnonzero(mine)], carriers)


def entity_array(conns: list[Connection], n: int) -> NDArray[np.int64]:
    """(n,) every mention's entity id, gathered from the writers; each mention must be
    held by exactly one."""
    out = np.full(n, -1, np.int64)
    held = np.zeros(n, np.int64)
    for c in conns:
        c.send(("entities", None))
    for c in conns:
        m, e = c.recv()
        out[m] = e
        np.add.at(held, m, 1)
    if (held != 1).any():
        raise SystemExit(
            f"mention {int(np.flatnonzero(held != 1)[0])} held by {int(held[held != 1][0])} writers"
        )
    return out


def collection_config(args: argparse.Namespace, records: list[dict[str, str]]) -> dict[str, Any]:
    """The collection's config, inferred from the first batch as the writer does (with
    ``--point-ties``, ties left to the cores' point order, as before ``tie_break``)."""
    config = new_collection_config(records[: args.batch], id_field="rec_id", gold_field="entity")
    if args.point_ties:
        config.pop("tie_break", None)
    return config


def run(
    args: argparse.Namespace,
    records: list[dict[str, str]],
    n_parts: int,
    check: Check | None,
    model: PairModel,
) -> dict[str, Any]:
    """Stream ``records`` through ``n_parts`` writers scored by ``model`` (one model for
    every run compared: two trainings need not give one model to the last bit)."""
    config = collection_config(args, records)
    core_k = int(_make_core(config["algorithm"], dict(config["params"])).k)
    stream = Stream(config, model, core_k)
    ctx = mp.get_context("fork")
    conns, procs, spaces = [], [], []
    for p in range(n_parts):
        ours, theirs = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(p, theirs, config, model.to_json()), daemon=True)
        proc.start()
        conns.append(ours)
        procs.append(proc)
        spaces.append(ours.recv())
    comps, loads = Components(), [0] * n_parts
    where = np.zeros(0, np.int64)  # each mention's part
    entities_per_batch, moves, moved, joins, carried = [], 0, 0, 0, 0
    route_s, wall0 = 0.0, time.perf_counter()
    for t, start in enumerate(range(0, len(records), args.batch)):
        batch = records[start : start + args.batch]
        rows, idx, sim = stream.batch(batch)
        t0 = time.process_time()
        routed = route(comps, start, idx, sim, loads)
        where = np.r_[where, routed.part]
        for _, dst, members in routed.moves:
            where[members] = dst
        steps = [_step(t + 1, p, start, rows, idx, sim, where) for p in range(n_parts)]
        route_s += time.process_time() - t0
        for src, dst, members in routed.moves:
            conns[src].send(("export", members))
            steps[dst].moved.append(conns[src].recv())
            moves, moved = moves + 1, moved + members.size
        joins += len({d for _, d, _ in routed.moves})
        sent = []
        for p, step in enumerate(steps):
            carried += step.carriers.mentions.size
            if step.new.mentions.size or step.moved or step.carriers.mentions.size:
                conns[p].send(("step", step))
                sent.append(conns[p])
        for c in sent:
            c.recv()
        ent = entity_array(conns, start + len(batch))
        if check is None:
            entities_per_batch.append(ent)
        else:
            check.batch(t, ent)
    wall = time.perf_counter() - wall0
    off_part = 0
    for c in conns:
        c.send(("floor_pairs_off_part", None))
        off_part += c.recv()
    seconds = []
    for c in conns:
        c.send(("seconds", None))
        seconds.append(c.recv())
        c.send(None)
    for proc in procs:
        proc.join()
    gold = np.unique([r["entity"] for r in records], return_inverse=True)[1]
    keys = ("step_s", "move_in_s", "remap_s", "move_out_s", "cpu_s", "points", "own")
    writers = {key: round(sum(s.get(key, 0.0) for s in seconds), 3) for key in keys}
    router = {key: round(v, 3) for key, v in stream.seconds.items()} | {
        "route_s": round(route_s, 3)
    }
    coordination = router["route_s"] + writers["move_in_s"] + writers["move_out_s"]
    work = sum(stream.seconds.values()) + route_s + writers["step_s"]
    work += writers["move_in_s"] + writers["move_out_s"]
    out: dict[str, Any] = {
        "bench": "parts",
        "parts": n_parts,
        "n": len(records),
        "batch": args.batch,
        "people": args.people,
        "seed": args.seed,
        "train": args.train,
        "tie_break": config.get("tie_break", "point"),
        "netns": spaces,
        "wall_s": round(wall, 2),
        "router": router,
        "writers": writers,
        "per_writer": [{k: round(v, 3) for k, v in s.items()} for s in seconds],
        "mentions_per_part": loads,
        "moves": moves,
        "moved_mentions": moved,
        "join_steps": joins,
        "carriers": carried,
        "coordination_share": round(coordination / work, 4),
        "floor_pairs_off_part": off_part,
        "pairwise_f1": round(pairwise_prf(gold, ent)[2], 4),
        "bcubed_f1": round(bcubed(gold, ent)[2], 4),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus",
    }
    if check is not None:
        out |= {
            "batches_partition_differs": check.partition_differs,
            "id_conflicts": check.id_conflicts,
            "differing_mentions_at_end": check.differing_mentions,
            "ids_matched": len(check.ids),
        }
    else:
        out["_entities"] = entities_per_batch
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument(
        "--train", type=int, default=10_000, help="records the pair model is trained on"
    )
    parser.add_argument("--parts", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--people", choices=PEOPLE, default="people")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--point-ties",
        action="store_true",
        help="leave equal scores to the cores' point order (the config's tie_break off)",
    )
    parser.add_argument("--json", type=Path, help="append one JSON line per run")
    args = parser.parse_args()
    records = people_records(args.people, args.n, seed=args.seed)
    model = trained_model(collection_config(args, records), records[: args.train])
    one = run(args, records, 1, None, model)
    check = Check(one.pop("_entities"))
    results = [one] + [run(args, records, p, Check(check.reference), model) for p in args.parts]
    for r in results:
        line = json.dumps(r)
        print(line, flush=True)
        if args.json is not None:
            with args.json.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")


if __name__ == "__main__":
    main()
