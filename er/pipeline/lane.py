"""The writer's loop over a collection's batches: each batch's graph write beside the
next batch's core step, checkpoints spaced by their cost, replays after a restart.

:func:`er.pipeline.writer.cluster_pending` drives it; each step is a :class:`Step`
(the writer's ``_BatchJob``): read the batches, search the index, cluster, finish. The
lane knows a step only through that protocol, so the scheduling and the step's stages
stay apart (issue #55: the two modules no longer import each other).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from billiard.exceptions import SoftTimeLimitExceeded
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from er._checkpoint import Owner, Prepared, commit_temp
from er.exceptions import ERError, TransientStoreError
from er.pipeline.state import _load_state, _prepare_state, _State, _take_state
from er.pipeline.stores import _LOST_DATABASE
from er.stores.graph import GraphStore
from er.stores.sql import Batch, batches_after, finish_batch

logger = logging.getLogger("er.pipeline.writer")

# When the writer checkpoints (issue #30): the checkpoint is the whole state, so its
# cost grows with the collection while a batch's work does not. It is written once
# the work since the last one reaches CHECKPOINT_WORK times that one's cost (under a
# tenth of the writer's time at any size), after at most CHECKPOINT_MAX_BATCHES
# batches (what a restart may have to replay), after a batch that changed the pair
# model (a replay scores with its checkpoint's model), and at the end of a run that
# does not keep its state in memory (the CLI's).
CHECKPOINT_WORK = 10.0
CHECKPOINT_MAX_BATCHES = 50

# A backlog step takes pending batches in sequence order while their mentions add up
# to at most this many (a batch larger than it goes alone). Larger steps cut MBSCC's
# work and the graph rows at the same F1 (bench/RESULTS.md, "Sharding a collection",
# its field keys' batches of 4,000); a step of 4,000 stays a few seconds, inside a
# task's time limit.
# Changing it changes no replay: the groups taken are recorded per batch.
GROUP_MAX_MENTIONS = 4000

_ABANDON: tuple[type[BaseException], ...] = (
    TransientStoreError,
    *_LOST_DATABASE,
    SoftTimeLimitExceeded,
)


@dataclass(frozen=True)
class _Queued:
    """A batch row as the writer plans its steps from it."""

    id: int
    seq: int
    status: str
    n: int  # accepted mentions
    group_end: int | None
    # the seqs it had before `er retry` queued it again under a new one
    earlier: tuple[int, ...] = ()

    @classmethod
    def of(cls, batch: Batch) -> _Queued:
        earlier = tuple(int(r["seq"]) for r in batch.retries or () if r["seq"] != batch.seq)
        return cls(batch.id, batch.seq, batch.status, batch.n_accepted, batch.group_end, earlier)


def plan_groups(queued: Sequence[_Queued], *, first_alone: bool) -> list[list[_Queued]]:
    """The writer's steps over ``queued`` (sequence order): consecutive batches grouped.

    A batch already stepped (its ``group_end`` recorded: done since the checkpoint,
    or cut short by a crash) goes with exactly the batches it went with. A new
    pending batch joins the step before it if that step is of new pending batches
    and their mentions with its own stay within GROUP_MAX_MENTIONS. A batch with no
    mentions (a new entity cut), one ``running`` unrecorded (stepped by a release that
    recorded no groups), one queued again under a new seq (its state may be in the
    checkpoint already) and, with ``first_alone``, the first one (the collection's
    first batch trains the pair model) go alone.

    Returns
    -------
    list of list of _Queued
        The steps in order; together they are ``queued``, each batch once.
    """
    groups: list[list[_Queued]] = []
    for batch in queued:
        if groups and _joins(groups[-1], batch, first_alone and len(groups) == 1):
            groups[-1].append(batch)
        else:
            groups.append([batch])
    return groups


def _joins(group: list[_Queued], batch: _Queued, first: bool) -> bool:
    """Whether ``batch`` is stepped with ``group`` (``first``: the collection's first)."""
    head = group[0]
    if head.group_end is not None or batch.group_end is not None:
        return batch.group_end == head.group_end  # recorded: as stepped before
    if first or batch.n == 0 or head.n == 0 or batch.earlier or head.earlier:
        return False
    if batch.status != "pending" or head.status != "pending":
        return False
    return sum(b.n for b in group) + batch.n <= GROUP_MAX_MENTIONS


class Step(Protocol):
    """One writer step over consecutive batches, in the order the lane calls it:
    :meth:`begin` (the rows), :meth:`search` then :meth:`cluster` (or :meth:`recut` for
    a batch of no mentions), which returns the graph write, and :meth:`finish`."""

    engine: Engine
    collection: str
    coll_id: int
    seq: int
    model_changed: bool
    replay: bool

    @property
    def batches(self) -> tuple[tuple[int, int], ...]:
        """``(batch id, seq)`` of every batch of the step, in sequence order."""

    def begin(self, state: _State) -> tuple[list[tuple[str, Any]], bool]:
        """The step's ``(external id, payload)`` rows and whether the state lacks them."""

    def search(self, state: _State, rows: list[tuple[str, Any]], timings: dict[str, float]) -> Any:
        """Featurize and index the rows; what :meth:`cluster` needs of the search."""

    def cluster(
        self, state: _State, rows: list[tuple[str, Any]], found: Any, timings: dict[str, float]
    ) -> Callable[[], None]:
        """Step the core and the entities; the batch's graph write, not yet run."""

    def recut(self, state: _State, timings: dict[str, float]) -> Callable[[], None]:
        """A new entity cut (a batch of no mentions); its graph write."""

    def finish(
        self, state: _State, rows: list[tuple[str, Any]], timings: dict[str, float]
    ) -> list[dict[str, Any]]:
        """Mark the batches done; one report per batch."""

    def again(self, group: Sequence[_Queued]) -> Step:
        """The step of ``group`` (done batches) replayed into the state."""


@dataclass
class _Pending:
    """A stepped batch: its graph write (run by :meth:`_Lane.settle`) and its prepared
    checkpoint, made current once that write succeeded."""

    job: Step
    rows: list[tuple[str, Any]]
    timings: dict[str, float]
    write: Callable[[], None]
    prepared: Prepared | None  # the checkpoint's files, if this batch is checkpointed
    running: Future[float] | None = None  # the write, once launched: its own seconds


@dataclass
class _Lane:
    """The cluster loop of one collection, each batch's graph write beside the next
    batch's clustering.

    The graph database applies a delta in its own process on about one core, so
    batch b's write runs while the worker steps the core for batch b+1. It starts
    after b+1's index search: the search's BLAS threads and the database on the same
    two cores slowed each other by 1.7-1.8x at 100k (bench/RESULTS.md). The durable
    order is the sequential loop's: b's checkpoint is made current and b marked done
    only after b's write succeeded, and before b+1's write starts; a crash anywhere
    replays b from b-1's checkpoint. A write that fails for good fails its batch, and
    b+1 is stepped again from the checkpoint.

    The graph records the last batch it applied (``graph_seq``; None: a graph written
    before it did, taken to hold every batch done). A batch done since the checkpoint
    is replayed into the state and, where the graph lacks it (a graph server that lost
    its last writes, or restored from a backup), written again: the core is
    deterministic and the write idempotent, so the graph ends as if nothing was lost.
    """

    path: Path
    owner: Owner  # the collection, named in its checkpoint
    config: Mapping[str, Any]
    state: _State
    on_batch: Callable[[dict[str, Any]], None] | None
    pool: ThreadPoolExecutor
    reports: list[dict[str, Any]] = field(default_factory=list)
    pending: _Pending | None = None
    graph_seq: int | None = None  # the last batch the graph applied (see the class note)

    def take(self, job: Step) -> None:
        """Step ``job`` (the previous batch's write launched after its search); settle
        the previous batch; leave this one pending.

        Raises
        ------
        TransientStoreError, OperationalError, InterfaceError, SoftTimeLimitExceeded
            (:data:`_ABANDON`) The batch stays pending; the task retries from the
            checkpoint. Any other error marks the batch failed and the loop goes on.
        """
        timings: dict[str, float] = {}
        if job.replay:
            self._replay(job)
            return
        outcome = self._step(job, timings)
        if self.settle():  # the previous write failed: the state went back to its checkpoint
            timings = {}
            outcome = self._step(job, timings)
        if isinstance(outcome, Exception):
            if isinstance(outcome, _ABANDON):
                raise outcome
            self._failed(job, outcome)
            return
        rows, write = outcome
        try:
            if write is None:  # the checkpoint already holds it (a crash came before "done")
                self._report(*job.finish(self.state, rows, timings))
                return
            prepared = None
            if self._due(job, timings):
                with _timed(timings, "checkpoint_s"):
                    prepared = _prepare_state(self.path, self.state, self.owner)
        except _ABANDON:
            raise
        except Exception as exc:  # e.g. a full disk
            self._failed(job, exc)
            return
        self.pending = _Pending(job, rows, timings, write, prepared)

    def _replay(self, job: Step) -> None:
        """Step a batch done since the checkpoint into the state (SQL holds it already):
        the core is deterministic, so the state becomes the one the first run had. Its
        graph write runs again if the graph lacks the batch (the class note)."""
        outcome = self._step(job, {})
        if isinstance(outcome, Exception):
            raise outcome
        self.state.unsaved += 1
        _, write = outcome
        if write is not None and self.graph_seq is not None and job.seq > self.graph_seq:
            write()
            self.graph_seq = job.seq
            logger.warning(
                "batch %d of %s written again: the graph lacked it", job.seq, job.collection
            )
        else:
            logger.info("batch %d of %s replayed into the state", job.seq, job.collection)

    def _due(self, job: Step, timings: dict[str, float]) -> bool:
        """Whether this batch's state is checkpointed (CHECKPOINT_WORK)."""
        state = self.state
        state.unsaved += 1
        state.unsaved_s += sum(timings.values())
        return (
            job.model_changed
            or state.unsaved >= CHECKPOINT_MAX_BATCHES
            or state.unsaved_s >= CHECKPOINT_WORK * state.checkpoint_s
        )

    def flush(self) -> None:
        """Checkpoint the state if batches were stepped since the last checkpoint."""
        if self.state.unsaved:
            timings: dict[str, float] = {}
            with _timed(timings, "checkpoint_s"):
                commit_temp(_prepare_state(self.path, self.state, self.owner), self.path)
            self._saved(timings["checkpoint_s"])

    def _saved(self, seconds: float) -> None:
        self.state.unsaved, self.state.unsaved_s = 0, 0.0
        self.state.checkpoint_s = seconds

    def _step(
        self, job: Step, timings: dict[str, float]
    ) -> tuple[list[tuple[str, Any]], Callable[[], None] | None] | Exception:
        """The batch's rows and its graph write (None if already checkpointed), or the
        error, which :meth:`take` handles once the previous batch is settled."""
        try:
            with _timed(timings, "sql_s"):  # reading the batch's mentions
                rows, fresh = job.begin(self.state)
            if not fresh:
                return rows, None
            if not rows:  # a batch of its own for a new entity cut (er.pipeline.cut)
                self._launch()
                return rows, job.recut(self.state, timings)
            found = job.search(self.state, rows, timings)
            self._launch()
            return rows, job.cluster(self.state, rows, found, timings)
        except Exception as exc:
            return exc

    def _launch(self) -> None:
        """Start the pending batch's graph write in the background, once."""
        if self.pending is not None and self.pending.running is None:
            self.pending.running = self.pool.submit(_seconds, self.pending.write)

    def settle(self) -> bool:
        """Finish the pending batch: its write, its checkpoint, its "done".

        Returns
        -------
        bool
            True if the batch failed for good (it is marked failed and the state is the
            checkpoint again). :data:`_ABANDON` errors propagate, the batch pending.
        """
        pending, self.pending = self.pending, None
        if pending is None:
            return False
        running = pending.running or self.pool.submit(_seconds, pending.write)
        waited = time.perf_counter()
        try:
            spent = _written(running)
            pending.timings["graph_wait_s"] = round(time.perf_counter() - waited, 6)
            pending.timings["graph_s"] = round(spent, 6)
            if self.graph_seq is not None:
                self.graph_seq = max(self.graph_seq, pending.job.seq)
            if pending.prepared is not None:
                with _timed(pending.timings, "checkpoint_s"):
                    commit_temp(pending.prepared, self.path)
                self._saved(pending.timings["checkpoint_s"])
            self._report(*pending.job.finish(self.state, pending.rows, pending.timings))
        except _ABANDON:
            raise
        except Exception as exc:
            self._failed(pending.job, exc)
            return True
        return False

    def _failed(self, job: Step, exc: Exception) -> None:
        """Mark ``job``'s batches failed; the state goes back to the checkpoint, and the
        batches done since are replayed into it, in the groups they were stepped in."""
        self._report(*_fail(job, exc))
        # the core may be half-stepped
        self.state = _load_state(self.path, self.config, self.owner)
        first = job.batches[0][1]
        with Session(job.engine) as session:
            done = [
                _Queued.of(b)
                for b in batches_after(session, job.coll_id, self.state.seq)
                if b.seq < first and b.status == "done"
            ]
        for group in plan_groups(done, first_alone=self.state.n_points == 0):
            self._replay(job.again(group))

    def _report(self, *reports: dict[str, Any]) -> None:
        for report in reports:
            self.reports.append(report)
            if self.on_batch is not None:
                self.on_batch(report)


def starting_state(
    graph: GraphStore, collection: str, path: Path, config: Mapping[str, Any], owner: Owner
) -> tuple[_State, int | None]:
    """The state a writer starts from and the last batch the graph applied for
    ``collection`` (:attr:`_Lane.graph_seq`: 0 for a graph that holds nothing of it,
    None for one written before the graph recorded it). A state this process kept in
    memory that is ahead of the graph gives way to the checkpoint, whose batches since
    are replayed and written again.

    Raises
    ------
    ERError
        One line: the graph is behind the checkpoint too, so the deltas it lacks can no
        longer be made again (a graph restored from an older backup, or emptied).
    """
    state = _take_state(path, config, owner)
    seq = graph.applied_seq(collection)
    if seq is None and graph.stats(collection)["nodes"] == 0:
        seq = 0
    if seq is not None and seq < state.seq:
        state = _load_state(path, config, owner)
    if seq is not None and seq < state.seq:
        raise ERError(
            f"the graph holds collection {collection!r} up to batch {seq}, its writer's "
            f"checkpoint up to batch {state.seq}: the graph lost writes it had "
            f"acknowledged; restore a graph taken at batch {state.seq} or later (it "
            "catches up from there by itself)"
        )
    return state, seq


def _written(write: Future[float]) -> float:
    """The background write's seconds, or its error. An error raised in this thread
    while it waits (a task's soft time limit) first lets the write end: the batch's
    fate is decided only once the graph holds it or not."""
    try:
        return write.result()
    except BaseException:
        if not write.done():
            with contextlib.suppress(BaseException):
                write.result()
        raise


def _fail(job: Step, exc: Exception) -> list[dict[str, Any]]:
    """Mark the step's batches failed with a one-line reason; later batches go on."""
    reason = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
    seqs = [seq for _, seq in job.batches]
    logger.error("batches %s of %s failed: %s", seqs, job.collection, reason, exc_info=exc)
    with Session(job.engine) as session, session.begin():
        for batch_id, _ in job.batches:
            finish_batch(session, batch_id, "failed", {}, reason)
    return [{"batch_seq": seq, "n_points": 0, "timings": {}, "error": reason} for seq in seqs]


def _seconds(call: Callable[[], None]) -> float:
    """Run ``call``; its wall time in seconds."""
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


class _timed:
    """Add the block's wall time to ``timings[key]``."""

    def __init__(self, timings: dict[str, float], key: str) -> None:
        self.timings, self.key = timings, key

    def __enter__(self) -> None:
        self.started = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        spent = time.perf_counter() - self.started
        self.timings[self.key] = round(self.timings.get(self.key, 0.0) + spent, 6)
