"""The writer's state: what it checkpoints after every batch, and the copy it keeps.

The checkpoint is :class:`_State` as JSON and ``.npy`` arrays, with the big append-only
matrices kept beside it as row logs (er/_checkpoint.py): write temp, then rename. A
pickled checkpoint of an older release is read once and saved again in that format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from er._checkpoint import (
    Owner,
    Prepared,
    RowLog,
    attach,
    commit_temp,
    detached,
    dump_temp,
    legacy_path,
    load,
    safe_load,
    save_rows,
)
from er.ann import KeyIndex
from er.entities import ArrayLedger, EntityLedger
from er.exceptions import ERError
from er.match import FieldTable, PairModel
from er.pipeline.config import _make_core, _safe


# -- the cluster writer --------------------------------------------------------------------
@dataclass
class _State:
    """What a collection's writer checkpoints after every batch."""

    seq: int  # the last batch whose delta reached the graph
    core: Any
    n_points: int = 0
    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)  # seq -> point rows
    ledger: ArrayLedger = field(default_factory=ArrayLedger)  # stable entity ids
    # the k-NN index (er.ann), created with the first batch; with blocking keys only
    # the vectors that rank their candidates (er.ann.Int8Rows; float32 before it, and
    # with "words", whose exact search needs them)
    index: Any = None
    keys: KeyIndex | None = None  # blocking keys ("candidates": "keys" or "words"), ditto
    rows_saved: dict[str, int] = field(default_factory=dict)  # rows of each row log
    # pair-model collections: every point's normalised fields, and the model that
    # scored the last batch (the collection's stored model, or the one trained here
    # on the first batch before the collection stored it)
    table: FieldTable | None = None
    model: PairModel | None = None
    # batches stepped since the last checkpoint, their work in seconds, and what that
    # checkpoint cost (er.pipeline.lane.CHECKPOINT_WORK)
    unsaved: int = 0
    unsaved_s: float = 0.0
    checkpoint_s: float = 0.0


NEAR_K = 3  # NEAR edges written per new mention: the evidence `er query explain` shows
# How the vectors are searched when a collection's candidates are "exact" (see
# _BatchJob._neighbors: an approximate backend would need per-seq saves to replay).
INDEX_BACKEND = "exact"


def _checkpoint_path(state_dir: Path, collection: str) -> Path:
    return state_dir / "collections" / _safe(collection) / "checkpoint.json"


def _rows_base(path: Path) -> Path:
    """What the row logs' file names start with (er._checkpoint.RowLog.file)."""
    return path.with_suffix("")


# The append-only matrices of the state, kept out of its graph (er/_checkpoint.py).
_ROW_LOGS = (
    RowLog("points", ("core", "_knn", "X"), rows_attr="_n"),
    RowLog("vectors", ("index", "_X"), rows_attr="_n"),
    RowLog("keys", ("keys", "_keys"), rows_attr="_n", dtype="int64"),
    # the blocking keys' vectors (er.ann.Int8Rows; older collections: "vectors")
    RowLog("vectors8", ("index", "_X"), rows_attr="_n", dtype="int8"),
    RowLog("scales", ("index", "_scale"), rows_attr="_n"),
)


def _load_state(path: Path, config: Mapping[str, Any], owner: Owner) -> _State:
    """``owner``'s last checkpoint, or a fresh core. A pickled checkpoint of an older
    release (:func:`er._checkpoint.legacy_path`) is read once and saved in the current
    format, which replaces it.

    Raises
    ------
    ERError
        One line: a checkpoint er cannot read, of a newer format, or another collection's.
    """
    if path.exists():
        state = load(path, owner)
        if not isinstance(state, _State):
            raise ERError(f"{path}: not an er checkpoint; move it away to rebuild the collection.")
        base = _rows_base(path)
    elif legacy_path(path).exists():
        state, base = _load_pickled(legacy_path(path)), legacy_path(path)
    else:
        return _State(seq=0, core=_make_core(config["algorithm"], dict(config["params"])))
    counts = getattr(state, "rows_saved", None)
    if not isinstance(counts, dict) or any(type(n) is not int or n < 0 for n in counts.values()):
        raise ERError(
            f"{path}: not a checkpoint er can read (its row counts); move it away to rebuild "
            "the collection from its stored mentions."
        )
    for log in _ROW_LOGS:
        if log.name in state.rows_saved:
            attach(state, base, log, state.rows_saved[log.name])
    if base != _rows_base(path):  # the pickle's rows go to the new row logs, all of them
        state.rows_saved = {}
        commit_temp(_prepare_state(path, state, owner), path)
    return state


def _load_pickled(path: Path) -> _State:
    """A checkpoint pickled by an older release, upgraded to the current :class:`_State`;
    its row logs not yet attached."""
    try:
        with path.open("rb") as f:
            state = safe_load(f)  # er's and numpy's classes alone: no code runs
    except Exception as exc:  # any malformed or refused pickle: one line, no traceback
        raise ERError(
            f"{path}: not a checkpoint er can read ({exc}); move it away to rebuild the "
            "collection from its stored mentions."
        ) from None
    if not isinstance(state, _State):
        raise ERError(f"{path}: not an er checkpoint; move it away to rebuild the collection.")
    if not hasattr(state, "ledger"):  # a checkpoint from before stable entity ids
        state.ledger, state.index = ArrayLedger(), None
    if not hasattr(state, "keys"):  # from before blocking keys: exact candidates
        state.keys = None
    if isinstance(state.ledger, EntityLedger):  # from before the array ledger
        state.ledger = ArrayLedger.from_ledger(state.ledger)
    if not hasattr(state, "unsaved"):  # from before checkpoints were spaced out
        state.unsaved, state.unsaved_s, state.checkpoint_s = 0, 0.0, 0.0
    if not hasattr(state, "rows_saved"):  # from before the row logs: rows in the pickle
        state.rows_saved = {}
    return state


def _prepare_state(path: Path, state: _State, owner: Owner) -> Prepared:
    """Append the new rows of the big matrices and write the checkpoint's arrays and
    temporary JSON; return them for :func:`er._checkpoint.commit_temp`. Until then the
    old checkpoint stands (its row counts ignore the rows appended past them)."""
    # the collections' folder and the collection's, each its user's alone when made here
    path.parent.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.parent.mkdir(exist_ok=True, mode=0o700)
    before = state.rows_saved
    with detached(state, _ROW_LOGS) as rows:
        for log in _ROW_LOGS:
            if log.name in rows:
                save_rows(_rows_base(path), log, rows[log.name], before.get(log.name, 0))
        state.rows_saved = {name: X.shape[0] for name, X in rows.items()}
        try:
            return dump_temp(path, state, owner)
        except BaseException:
            state.rows_saved = before
            raise


# The writer's state after its last run, per checkpoint, with the checkpoint file's
# identity then; the next run of the same process starts from it instead of reading
# the checkpoint again (n x d vectors), unless another process wrote a newer one.
_KEPT: dict[Path, tuple[tuple[int, int, int], _State]] = {}
_KEEP_AT_MOST = 4  # collections whose state a worker keeps in memory


def _file_id(path: Path) -> tuple[int, int, int] | None:
    """(inode, mtime ns, size): every save renames a new file over the old one."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _take_state(path: Path, config: Mapping[str, Any], owner: Owner) -> _State:
    """The state this process kept after its last run if the checkpoint is still the
    one it wrote; else the checkpoint. Taken out: an error mid-run leaves nothing kept."""
    kept = _KEPT.pop(path, None)
    if kept is not None and kept[0] == _file_id(path):
        return kept[1]
    return _load_state(path, config, owner)


def _keep_state(path: Path, state: _State) -> None:
    """Keep ``state`` for the next run: the checkpoint just written, or ahead of it by
    the batches done since (``state.unsaved``)."""
    file_id = _file_id(path)
    if file_id is None:
        return
    _KEPT[path] = (file_id, state)
    while len(_KEPT) > _KEEP_AT_MOST:
        del _KEPT[next(iter(_KEPT))]


def _point_nodes(estimator: Any, n: int) -> NDArray[np.int64]:
    """(n,) the delta's node id of each input point.

    Batch cores number points ``0..n-1``; MBSCC keeps stable ids (``point_ids_``,
    the points' part of ``node_ids_``) and GRINCH its own leaf ids (``leaf_ids_``).
    """
    for name in ("leaf_ids_", "point_ids_", "node_ids_"):
        ids = getattr(estimator, name, None)
        if ids is not None:
            return np.asarray(ids, dtype=np.int64)[:n]
    return np.arange(n, dtype=np.int64)
