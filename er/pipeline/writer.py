"""The cluster writer (DESIGN §4 step 2).

One writer per collection takes the pending batches in sequence order under the
collection's writer lock: it reads each batch's features (made by the queued ingest,
:mod:`er.pipeline.features`; made here where missing), finds each new mention's
candidates (blocking keys, or the exact k-NN index), scores them, steps the
incremental core (MBSCC by default, GRINCH or LLAMA per collection) and the
stable-entity ledger, applies the delta to the graph stamped with the batch seq,
checkpoints the state (:mod:`er.pipeline.state`) and marks the batch done with
timings per stage.

Pending batches are stepped together, up to ``er.pipeline.lane.GROUP_MAX_MENTIONS``
mentions per step (a backlog step, issue #30). The index and the pair model still take
the step's batches one after the other (:meth:`_BatchJob._parts`), so MBSCC on the
default floor components builds the hierarchy the batches would one by one; what the
group shares is the per-step cost (the core's rounds over the touched components, the
graph write, the entity step, the checkpoint). Which batches went together is recorded
in their rows before the step (``Batch.group_end``), so a replay groups them the same
way; a batch arriving alone is still resolved alone, and the collection's first batch,
which trains the pair model, always is.

Crash safety comes from the order of the cluster steps: the graph write is
idempotent and stamped, the checkpoint records the last applied seq (it is prepared
before the graph write starts, and made current only once that write succeeded), the
SQL "done" comes last; the next batch's write starts only after that (the write runs
beside the next batch's core step: :class:`_Lane`). A worker killed anywhere re-runs
the batch from the previous checkpoint; the core is deterministic, so it computes the
same delta, and applying it again changes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Engine, update
from sqlalchemy.orm import Session

from er._checkpoint import Owner
from er.ann import Int8Rows, KeyIndex, batch_neighbors, make_index
from er.ann._index import rank
from er.ann._keys import TEXT_KEY_BUDGET, TEXT_KEY_CANDIDATES
from er.cluster import MBSCC
from er.delta import ClusteringDelta
from er.entities import EntityStep
from er.evaluation import cut_at_score
from er.exceptions import ERError
from er.match import FieldTable, PairModel
from er.pipeline.config import DEFAULT_CUT, EXACT_MAX
from er.pipeline.features import (
    BatchFeatures,
    aligned,
    features_digest,
    joined,
    make_features,
    usable,
)
from er.pipeline.lane import _Lane, _Queued, _timed, plan_groups, starting_state
from er.pipeline.scores import candidate_scores, current_model, model_scores, pair_scores, rescored
from er.pipeline.state import (
    INDEX_BACKEND,
    NEAR_K,
    _checkpoint_path,
    _keep_state,
    _point_nodes,
    _State,
)
from er.pipeline.train import grown_model, grown_past_first_model, train_on_batch
from er.stores.graph import GraphStore
from er.stores.sql import (
    Batch,
    Collection,
    batch_mentions,
    batches_after,
    drop_features,
    find_collection,
    finish_batch,
    return_batch,
    set_mention_nodes,
    stored_features,
    writer_lock,
)

logger = logging.getLogger(__name__)


def cluster_pending(
    engine: Engine,
    graph: GraphStore,
    *,
    collection: str,
    state_dir: Path,
    on_batch: Callable[[dict[str, Any]], None] | None = None,
    budget_s: float | None = None,
    flush: bool = True,
    worker: int | None = None,
) -> list[dict[str, Any]]:
    """Cluster a collection's pending batches in sequence order (the one writer).

    Holds the collection's writer lock throughout; each batch commits on its own.
    Running it again, or twice at once, applies nothing twice. A batch's graph write
    runs in the graph database while the core steps on the next batch here
    (:class:`_Lane`); its checkpoint and SQL "done" still come in sequence order,
    after that write succeeded.

    Parameters
    ----------
    budget_s : float, optional
        Take no further batch once this many seconds have passed (the first is always
        taken, and the ones taken finish); the rest stay pending for the next run, so
        a worker's task stays well inside its time limit however long the backlog.
    flush : bool, default True
        Checkpoint at the end if the last batches were not (er.pipeline.lane.CHECKPOINT_WORK). A
        worker, which keeps the state in memory between runs, passes False; batches
        done since the checkpoint are replayed into the state (not re-written) by the
        next process that starts from it.
    worker : int, optional
        The id of the worker process running this (``er.stores.sql.Worker``): each batch
        it marks running names it, so ``er status`` can tell whose batches a worker that
        died left running. None: an in-process run.

    Returns
    -------
    list of dict
        Per batch: ``batch_seq``, ``n_points``, ``timings`` (seconds per stage).
    """
    with Session(engine) as session:
        coll = find_collection(session, collection)
        if coll is None:
            raise ERError(f"no collection {collection!r}.")
        coll_id, config = coll.id, dict(coll.config)
    if "featurizer" not in config:
        raise ERError(f"collection {collection!r} was not made by er ingest; nothing to cluster.")
    path = _checkpoint_path(state_dir, collection)
    with writer_lock(engine, coll_id, state_dir / "locks"):
        deadline = None if budget_s is None else time.monotonic() + budget_s
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="er-graph-write") as pool:
            owner = Owner(coll_id, collection)
            state, graph_seq = starting_state(graph, collection, path, config, owner)
            lane = _Lane(path, owner, config, state, on_batch, pool, graph_seq=graph_seq)
            with Session(engine) as session:
                queued = [_Queued.of(b) for b in batches_after(session, coll_id, lane.state.seq)]
            taken = 0
            for group in plan_groups(queued, first_alone=lane.state.n_points == 0):
                if taken and deadline is not None and time.monotonic() > deadline:
                    break
                job = _BatchJob.of(engine, graph, collection, coll_id, config, group, worker)
                lane.take(job)
                taken += not job.replay
            lane.settle()
            if flush:
                lane.flush()
        _keep_state(path, lane.state)
    return lane.reports


@dataclass
class _BatchJob:
    """One step's batches (one, or a backlog group): :meth:`begin` (their rows),
    :meth:`search` (featurize, index), :meth:`cluster` (core, entities; returns the
    graph write) and :meth:`finish` (SQL "done"); :class:`_Lane` orders them and the
    writes across steps. ``batch_id`` and ``seq`` are the group's last batch's: the
    graph write, the entity step and the checkpoint are stamped with it."""

    engine: Engine
    graph: GraphStore
    collection: str
    coll_id: int
    config: Mapping[str, Any]
    batch_id: int
    seq: int
    nodes: list[int] | None = None  # the batch's mention node ids, once stepped
    notes: dict[str, Any] | None = None  # values not read as their type, or cut
    model: PairModel | None = None  # the pair model that scored the batch
    model_changed: bool = False  # ... when it is not the one the state had
    replay: bool = False  # done since the checkpoint: stepped into the state alone
    # every batch of the step as (id, seq), the last one (batch_id, seq); empty: alone
    members: tuple[tuple[int, int], ...] = ()
    sizes: list[int] | None = None  # each member's mentions, once read
    # seqs the batch had before `er retry` moved it; the one the state holds it under
    earlier: tuple[int, ...] = ()
    held: int | None = None
    worker: int | None = None  # the worker process stepping it (None: in process)
    # batch id -> (digest, data) of the features its ingest stored (read by begin())
    stored: dict[int, tuple[str, bytes]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        engine: Engine,
        graph: GraphStore,
        collection: str,
        coll_id: int,
        config: Mapping[str, Any],
        group: Sequence[_Queued],
        worker: int | None = None,
    ) -> _BatchJob:
        """The step of ``group`` (from :func:`plan_groups`) on ``worker``."""
        last = group[-1]
        job = cls(engine, graph, collection, coll_id, config, last.id, last.seq, worker=worker)
        job.members = tuple((b.id, b.seq) for b in group)
        job.replay = all(b.status == "done" for b in group)
        job.earlier = last.earlier if len(group) == 1 else ()
        return job

    @property
    def batches(self) -> tuple[tuple[int, int], ...]:
        """``(batch id, seq)`` of every batch of the step, in sequence order."""
        return self.members or ((self.batch_id, self.seq),)

    def again(self, group: Sequence[_Queued]) -> _BatchJob:
        """The step of ``group``, batches done since the checkpoint, replayed into the
        state after a failure (:meth:`er.pipeline.lane._Lane._failed`)."""
        job = _BatchJob.of(
            self.engine,
            self.graph,
            self.collection,
            self.coll_id,
            self.config,
            group,
            self.worker,
        )
        job.replay = True
        return job

    def begin(self, state: _State) -> tuple[list[tuple[str, Any]], bool]:
        """The step's ``(external id, payload)`` rows, batch after batch, and whether
        ``state`` lacks them (else a crash or a failure came after its checkpoint,
        before "done": under this seq, or under one it had before `er retry` moved it);
        marks the batches running on this worker, records their group before any of
        it is written, and reads the features their ingest stored (:meth:`_features`)."""
        self.held = next((seq for seq in self.earlier if seq in state.ranges), None)
        fresh = self.seq > state.seq and self.held is None
        with Session(self.engine) as session, session.begin():
            # one query per batch: an IN list of seqs made SQLite's planner scan the
            # collection's mentions (0.2 s a step at 300k) instead of the batch_seq index
            parts = [batch_mentions(session, self.coll_id, seq) for _, seq in self.batches]
            if fresh:
                self.stored = stored_features(session, [b for b, _ in self.batches])
            if fresh and not self.replay:
                ids = [batch_id for batch_id, _ in self.batches]
                session.execute(
                    update(Batch)
                    .where(Batch.id.in_(ids))
                    .values(status="running", group_end=self.seq, worker_id=self.worker)
                )
        self.sizes = [len(part) for part in parts]
        return [row for part in parts for row in part], fresh

    def finish(
        self, state: _State, rows: list[tuple[str, Any]], timings: dict[str, float]
    ) -> list[dict[str, Any]]:
        """Give the mentions their nodes and mark the step's batches done together
        (the last step). Each batch stores the step's timings over its batch count
        (a batch's share of the work); the notes go to the last batch.

        Returns
        -------
        list of dict
            Per batch: ``batch_seq``, ``n_points``, ``timings``.
        """
        nodes = self.nodes
        if nodes is None:  # not stepped here: the checkpoint holds the step
            seqs = [seq for _, seq in self._finished()]
            first = state.ranges.get(seqs[0], (0, 0))[0]
            stop = state.ranges.get(seqs[-1], (0, 0))[1]
            nodes = _point_nodes(state.core, stop)[first:stop].tolist()
        exts = [ext for ext, _ in rows]
        sizes = self.sizes if self.sizes is not None else [len(rows)]
        reports = []
        with Session(self.engine) as session, session.begin():
            # before finish_batch stores the timings: the UPDATE and commit are not in it
            with _timed(timings, "sql_s"):
                set_mention_nodes(session, self.coll_id, dict(zip(exts, nodes, strict=True)))
            if self.model is not None:
                _store_model(session, self.coll_id, self.model)
            if self.held is not None:  # held under its seq before `er retry`: back to it
                return_batch(session, self.coll_id, self.batch_id, self.seq, self.held)
            drop_features(session, [batch_id for batch_id, _ in self.batches])
            share = {key: round(value / len(sizes), 6) for key, value in timings.items()}
            for (batch_id, seq), size in zip(self._finished(), sizes, strict=True):
                notes = self.notes if seq == self.seq else None
                finish_batch(session, batch_id, "done", share, None, notes)
                reports.append({"batch_seq": seq, "n_points": size, "timings": share})
        logger.info(
            "batches %s of %s: %d points, %s",
            [seq for _, seq in self._finished()],
            self.collection,
            len(nodes),
            timings,
        )
        return reports

    def _finished(self) -> tuple[tuple[int, int], ...]:
        """``(batch id, seq)`` of the step's batches as :meth:`finish` leaves them."""
        return self.batches if self.held is None else ((self.batch_id, self.held),)

    def search(
        self, state: _State, rows: list[tuple[str, Any]], timings: dict[str, float]
    ) -> _Found:
        """The step's features (:meth:`_features`) added to the index (``state.index``
        advances); the batch's neighbours among all points."""
        made = self._features(rows, timings)
        X = made.X
        with _timed(timings, "index_s"):
            if made.keys is not None:  # candidates "keys" or "words" (the config checks)
                words = self.config["candidates"] == "words"
                search = self._worded if words else self._keyed
                found = [search(state, X[part], made.keys[part]) for part in self._parts()]
            else:
                found = [self._neighbors(state, X[part]) for part in self._parts()]
        idx = np.concatenate([i for i, _ in found])
        sim = np.concatenate([v for _, v in found])
        return _Found(X, idx, sim, made)

    def _features(self, rows: list[tuple[str, Any]], timings: dict[str, float]) -> BatchFeatures:
        """Each batch's features as the ingest process that stored it made them, under
        this config (:mod:`er.pipeline.features`); made here where they are not."""
        with _timed(timings, "features_read_s"):
            given = usable(self.stored, features_digest(self.config))
        parts = []
        with _timed(timings, "featurize_s"):
            for (batch_id, _), part in zip(self.batches, self._parts(), strict=True):
                own = rows[part]
                made = given.get(batch_id)
                made = None if made is None else aligned(made, [ext for ext, _ in own])
                parts.append(make_features(self.config, own) if made is None else made)
            return joined(parts)

    def _parts(self) -> list[slice]:
        """Each batch's rows of the step. The index takes the batches one after the
        other, and the pair model scores them so, as if each were stepped alone: a
        record's candidates are among the records before it and in its own batch, and
        its pair prior is the collection's after its batch. With the default core
        (MBSCC re-deriving the floor components it touches) a step then builds the
        hierarchy its batches would one by one; only the per-step costs are shared."""
        assert self.sizes is not None  # begin() read them
        sizes = self.sizes
        ends = np.cumsum(sizes, dtype=np.int64)
        return [slice(int(e - n), int(e)) for n, e in zip(sizes, ends, strict=True)]

    def cluster(
        self,
        state: _State,
        rows: list[tuple[str, Any]],
        found: _Found,
        timings: dict[str, float],
    ) -> Callable[[], None]:
        """Score the candidates, step the core on them and the entity ledger on its
        hierarchy; advance ``state``. Returns the write of the batch's delta to the
        graph, for the caller to run."""
        X, idx, sim = found.X, found.idx, found.sim
        first = state.n_points
        if found.features.rows is not None:
            self.notes = found.features.notes
            with _timed(timings, "score_s"):
                sim = self._scored(state, found.features.rows, idx, first)
                if self.model_changed and first and isinstance(state.core, MBSCC):
                    sim = rescored(state, idx, first, self.config)
        with _timed(timings, "cluster_s"):
            if isinstance(state.core, MBSCC):
                scores = pair_scores(state) if state.core.complete_max else None
                state.core.partial_fit(X, neighbors=(idx, sim), pair_scores=scores)
            else:
                state.core.partial_fit(X)
        stop = first + X.shape[0]
        point_nodes = _point_nodes(state.core, stop)
        nodes = point_nodes[first:stop]
        self.nodes = nodes.tolist()
        with _timed(timings, "entities_s"):
            cut = float(self.config.get("cut_threshold", DEFAULT_CUT))
            step = _entity_step(state, self.seq, point_nodes, cut)
            near = _near_rows(point_nodes, first, idx, sim)
        external = dict(zip(nodes.tolist(), (ext for ext, _ in rows), strict=True))
        delta = state.core.delta_
        state.seq, state.n_points = self.seq, stop
        for (_, seq), part in zip(self.batches, self._parts(), strict=True):
            state.ranges[seq] = (first + part.start, first + part.stop)

        def write() -> None:
            self.graph.apply_delta(
                self.collection, delta, self.seq, external_ids=external, entities=step, near=near
            )

        return write

    def recut(self, state: _State, timings: dict[str, float]) -> Callable[[], None]:
        """Re-derive the entities at the collection's (new) cut from the current
        hierarchy; the ledger matches them to the current ones (a batch with no
        mentions). Returns the graph write of the entity step alone."""
        self.nodes = []
        step = None
        if state.n_points:
            with _timed(timings, "entities_s"):
                cut = float(self.config.get("cut_threshold", DEFAULT_CUT))
                point_nodes = _point_nodes(state.core, state.n_points)
                label = cut_at_score(state.core.hierarchy_, cut)
                step = state.ledger.step_labels(self.seq, point_nodes, label)
        state.seq = self.seq
        state.ranges[self.seq] = (state.n_points, state.n_points)
        delta = ClusteringDelta.empty(str(self.config.get("algorithm", "")))

        def write() -> None:
            self.graph.apply_delta(self.collection, delta, self.seq, entities=step)

        return write

    def _scored(
        self,
        state: _State,
        rows: list[list[str | None]],
        idx: NDArray[np.int64],
        first: int,
    ) -> NDArray[np.float32]:
        """(b, k) the pair model's match probability of each candidate pair, in place of
        the vectors' cosine (DESIGN §4 step 2); 0 where ``idx`` is -1. The step's
        batches are scored one after the other (:meth:`_parts`)."""
        if state.table is None:
            state.table = FieldTable(list(self.config["field_types"]))
        held = state.model
        prob = np.zeros(idx.shape, np.float32)
        for part in self._parts():
            state.table.add(rows[part])
            at = first + part.start
            prob[part] = self._scored_part(state, idx[part], at)
        self.model, self.model_changed = state.model, state.model is not held
        return prob

    def _scored_part(
        self, state: _State, idx: NDArray[np.int64], first: int
    ) -> NDArray[np.float32]:
        """(b, k) the probabilities of one batch's candidates, its rows already in the
        table; ``state.model`` becomes the model that scored them."""
        assert state.table is not None  # _scored made it
        # a replay scores as the first run did: with the checkpoint's model, since a
        # batch that changed the model was checkpointed (CHECKPOINT_WORK)
        model = state.model if self.replay else None
        if model is None:
            model = current_model(self.config, state)
        population = len(state.table)
        if model is None:  # the collection's first batch: train on it (issue #29)
            model = train_on_batch(state.table, self.config, idx, first)
        elif grown_past_first_model(model, population):  # search indexed this batch
            index = state.index
            model = grown_model(
                state.table, self.config, lambda: _vectors(index, population), model
            )
        state.model = model
        # the prior of a random pair of the collection as it stands after this batch
        scores = model_scores(model, state.table, population, self.config)
        return candidate_scores(scores, idx, first)

    def _neighbors(
        self, state: _State, X: NDArray[np.float32]
    ) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        """Add the batch to the collection's k-NN index; its neighbours among all points.

        The index is exact: it is saved with the checkpoint, so a replayed batch
        finds the same neighbours. (An approximate backend would have to be saved
        per batch seq beside the checkpoint to replay exactly; at FEBRL sizes
        ``auto`` would pick exact search anyway.) MBSCC takes these lists instead of
        searching itself (``partial_fit(neighbors=)``; with exact lists the result
        is the same), and the top ``NEAR_K`` become the mentions' NEAR edges.
        """
        if state.index is None:
            state.index = make_index(INDEX_BACKEND, dim=X.shape[1])
        return batch_neighbors(state.index, X, self._k(state))

    def _keyed(
        self, state: _State, X: NDArray[np.float32], keys: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        """Add the batch to the blocking keys and the vectors; its best k candidates.

        The records sharing a key with each new record (:class:`er.ann.KeyIndex`,
        every record so far and the batch's own) are ranked by the vectors' cosine
        (float32; the stored rows in int8, er.ann.Int8Rows), as exact search ranks
        all records, and the best k kept (-1 padded: a record may share no key).
        Keys and answers are functions of the records in order, so a replayed batch
        finds the same lists.
        """
        if state.index is None:
            state.index = Int8Rows(X.shape[1])
            state.keys = KeyIndex(keys.shape[1])
        assert state.keys is not None  # created with the index
        state.index.add(X)
        candidates = state.keys.candidates(state.keys.add(keys))
        if isinstance(state.index, Int8Rows):
            return state.index.rank(X, candidates, self._k(state))
        # a collection made before the int8 rows keeps its float32 vectors
        return rank(X, state.index.vectors, candidates, self._k(state), np.float32)

    def _worded(
        self, state: _State, X: NDArray[np.float32], keys: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        """Free text: exact k-NN up to EXACT_MAX records, then the records sharing a
        word or a pair of adjacent words (:func:`er.ann.text_keys`) ranked by the
        vectors' cosine. The keys are indexed from the first record, so the switch
        needs no rebuild; both answers are functions of the records in order."""
        if state.index is None:
            state.index = make_index(INDEX_BACKEND, dim=X.shape[1])
            state.keys = KeyIndex(keys.shape[1], TEXT_KEY_BUDGET, TEXT_KEY_CANDIDATES)
        assert state.keys is not None  # created with the index
        ids = state.keys.add(keys)
        if len(state.index) + X.shape[0] <= EXACT_MAX:
            return batch_neighbors(state.index, X, self._k(state))
        state.index.add(X)
        candidates = state.keys.candidates(ids)
        return rank(X, state.index.vectors, candidates, self._k(state), np.float32)

    @staticmethod
    def _k(state: _State) -> int:
        """Neighbours per new mention: the core's k, at least NEAR_K."""
        return max(int(getattr(state.core, "k", 0)), NEAR_K)


@dataclass
class _Found:
    """What :meth:`_BatchJob.search` found: the batch's vectors, its neighbours among all
    points and their cosine, and its features (normalised fields of pair-model
    collections)."""

    X: NDArray[np.float32]  # (b, dim)
    idx: NDArray[np.int64]  # (b, k) global point indices, -1 for none
    sim: NDArray[np.float32]  # (b, k) cosine
    features: BatchFeatures


def _vectors(index: Any, stop: int) -> NDArray[np.float32]:
    """(stop, d) the first ``stop`` stored vectors in float32 (as stored: int8 rows
    dequantized, so a replay's retraining sees what the first run saw)."""
    if isinstance(index, Int8Rows):
        return index.floats(stop)
    return np.asarray(index.vectors[:stop], np.float32)


def _store_model(session: Session, coll_id: int, model: PairModel) -> None:
    """Keep ``model`` with the collection unless it already holds this version or newer."""
    coll = session.get(Collection, coll_id)
    if coll is None:
        return
    held = coll.config.get("pair_model")
    if held is None or held.get("version", 0) < model.version:
        coll.config = {**coll.config, "pair_model": model.to_json()}


def _entity_step(state: _State, seq: int, point_nodes: NDArray[np.int64], cut: float) -> EntityStep:
    """The ledger's step for a batch: the entities at ``cut`` of what the core redid.

    An MBSCC stepping per floor component redid a closed part of the points (every
    entity of its points lies inside it, since entities sit below the root's score
    0 when the cut is above 0): those alone are cut and matched; a grafted batch gives
    its points' clusters at the cut (er.cluster._graft). Otherwise the whole
    hierarchy is.
    """
    core = state.core
    if isinstance(core, MBSCC) and core.marking == "components" and cut > 0:
        part = core.touched_
        if part.hierarchy is not None:
            label = cut_at_score(part.hierarchy, cut)
        elif part.at == cut:  # a grafted batch: its clusters at the cut, given
            assert part.labels is not None
            label = part.labels
        else:  # grafted at another cut than the collection's (er cut): read it all
            label = cut_at_score(core.hierarchy_, cut)
            return state.ledger.step_labels(seq, point_nodes, label)
        return state.ledger.step_part(seq, point_nodes[part.points], label)
    label = cut_at_score(core.hierarchy_, cut)
    return state.ledger.step_labels(seq, point_nodes, label)


def _near_rows(
    point_nodes: NDArray[np.int64],
    first: int,
    idx: NDArray[np.int64],
    sim: NDArray[np.float32],
) -> list[tuple[int, int, float]]:
    """``(mention, neighbour, cosine)`` of each new point's ``NEAR_K`` nearest neighbours.

    Parameters
    ----------
    idx, sim : ndarray, shape (b, k)
        The batch's neighbours (global point indices, -1 for none) and similarities.
    """
    rows = []
    for r in range(idx.shape[0]):
        for j, s in zip(idx[r, :NEAR_K].tolist(), sim[r, :NEAR_K].tolist(), strict=True):
            if j >= 0:
                rows.append((int(point_nodes[first + r]), int(point_nodes[j]), float(s)))
    return rows
