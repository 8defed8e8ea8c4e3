"""The writer's checkpoint: row logs beside a small pickle (er/_checkpoint.py, pipeline).

Oracles: the state as last saved (kept in memory by the test), and an MBSCC core and
k-NN index stepped without any save/load in between.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from er._checkpoint import RowLog, attach, commit_temp, detached, dump_atomic, save_rows
from er.ann import batch_neighbors, make_index
from er.cluster import MBSCC, normalize_rows
from er.exceptions import ERError
from er.pipeline import PIPELINE_PARAMS
from er.pipeline.state import _load_state, _prepare_state, _State


@dataclass
class _Holder:
    X: np.ndarray


@dataclass
class _Toy:
    seq: int
    a: _Holder
    rows_saved: dict[str, int] = field(default_factory=dict)


_LOG = RowLog("a", ("a", "X"))


def _save(path: Path, state: _Toy, die_before_pickle: bool) -> None:
    """The pipeline's save order on a toy state; optionally die after the rows."""
    with detached(state, (_LOG,)) as rows:
        save_rows(path, _LOG, rows["a"], state.rows_saved.get("a", 0))
        if die_before_pickle:
            return
        state.rows_saved = {"a": rows["a"].shape[0]}
        dump_atomic(path, state)


def _load(path: Path) -> _Toy:
    with path.open("rb") as f:
        state = pickle.load(f)
    attach(state, path, _LOG, state.rows_saved["a"])
    return state


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 5), st.booleans(), st.booleans()), min_size=1, max_size=8
    ),
    seed=st.integers(0, 2**16),
)
def test_loading_after_any_crash_gives_the_last_completed_save(tmp_path_factory, steps, seed):
    """Each step appends rows and saves; a save may die after its rows reach the file
    (before the pickle), and a death may be followed by a restart from disk."""
    path = tmp_path_factory.mktemp("ckpt") / "checkpoint.pkl"
    rng = np.random.default_rng(seed)
    state = _Toy(seq=0, a=_Holder(np.zeros((0, 3), np.float32)))
    _save(path, state, die_before_pickle=False)
    last = state.a.X.copy()
    for seq, (grow, dies, restart) in enumerate(steps, start=1):
        new = rng.normal(size=(grow, 3)).astype(np.float32)
        state.a.X = np.vstack([state.a.X, new])
        state.seq = seq
        _save(path, state, die_before_pickle=dies)
        if not dies:
            last = state.a.X.copy()
        if dies or restart:
            state = _load(path)
            np.testing.assert_array_equal(state.a.X, last)
    final = _load(path)
    np.testing.assert_array_equal(final.a.X, last)
    assert final.a.X.dtype == np.float32


def test_a_row_file_shorter_than_the_count_is_an_error(tmp_path) -> None:
    path = tmp_path / "checkpoint.pkl"
    state = _Toy(seq=1, a=_Holder(np.ones((4, 2), np.float32)))
    _save(path, state, die_before_pickle=False)
    _LOG.file(path).write_bytes(b"\0" * 8)  # one row of two float32
    with pytest.raises(ERError, match="holds 1 rows, the checkpoint counts 4"):
        _load(path)


def _batches(n_batches: int, b: int, d: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(8, d))
    out = []
    for _ in range(n_batches):
        X = centers[rng.integers(0, 8, b)] + 0.3 * rng.normal(size=(b, d))
        out.append(normalize_rows(X.astype(np.float32)))
    return out


def _step(state: _State, X: np.ndarray) -> None:
    if state.index is None:
        state.index = make_index("exact", dim=X.shape[1])
    state.core.partial_fit(X, neighbors=batch_neighbors(state.index, X, state.core.k))
    state.seq += 1
    state.n_points += X.shape[0]


def test_the_pipeline_state_saved_and_loaded_steps_like_one_never_saved(tmp_path) -> None:
    """Save/load between batches changes nothing: same hierarchy, delta, ids, neighbours."""
    path = tmp_path / "checkpoint.pkl"
    config = {"algorithm": "mbscc", "params": {}}
    kept = _State(seq=0, core=MBSCC(**PIPELINE_PARAMS["mbscc"]))  # as _load_state makes it
    reloaded = _load_state(path, config)
    for X in _batches(4, 60, 256):
        _step(kept, X)
        _step(reloaded, X)
        commit_temp(_prepare_state(path, reloaded), path)
        before = reloaded.index.vectors.shape[0]
        reloaded = _load_state(path, config)
        # given the index's neighbours, MBSCC keeps no copy of the points
        assert reloaded.rows_saved == {"points": 0, "vectors": before}
        np.testing.assert_array_equal(reloaded.core._knn.points, kept.core._knn.points)
        np.testing.assert_array_equal(reloaded.index.vectors, kept.index.vectors)
        np.testing.assert_array_equal(reloaded.core.node_ids_, kept.core.node_ids_)
        for name in ("node_id", "size", "edges_added", "edges_retired", "retired"):
            np.testing.assert_array_equal(
                getattr(reloaded.core.delta_, name), getattr(kept.core.delta_, name)
            )
    # the pickle holds no vectors
    whole = len(pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL))
    assert path.stat().st_size < whole - kept.index.vectors.nbytes + 4096


def test_a_checkpoint_from_before_the_row_logs_loads_and_saves(tmp_path) -> None:
    """Old pickles hold the vectors inline (no ``rows_saved``); the next save writes them."""
    path = tmp_path / "checkpoint.pkl"
    state = _State(seq=0, core=MBSCC())
    X = _batches(1, 40, 8)[0]
    _step(state, X)
    del state.__dict__["rows_saved"]
    dump_atomic(path, state)
    old = _load_state(path, {"algorithm": "mbscc", "params": {}})
    np.testing.assert_array_equal(old.core._knn.points, state.core._knn.points)
    commit_temp(_prepare_state(path, old), path)
    again = _load_state(path, {"algorithm": "mbscc", "params": {}})
    np.testing.assert_array_equal(again.index.vectors, state.index.vectors)


def test_a_checkpoint_pickled_before_the_package_split_loads() -> None:
    # Before issue #28 the state class was er.pipeline._State; data dirs hold such pickles.
    import pickle

    from er.pipeline.state import _State as Current

    old = pickle.dumps(Current(seq=3, core=None), protocol=0)
    assert b"er.pipeline.state\n_State" in old
    old = old.replace(b"er.pipeline.state\n_State", b"er.pipeline\n_State")
    loaded = pickle.loads(old)
    assert isinstance(loaded, Current) and loaded.seq == 3


def test_the_keys_int8_vectors_go_to_row_logs_and_come_back(tmp_path) -> None:
    """A blocking-keys collection's int8 rows and scales are row logs, not pickled."""
    from er.ann import Int8Rows

    path = tmp_path / "checkpoint.pkl"
    config = {"algorithm": "mbscc", "params": {}}
    state = _load_state(path, config)
    state.index = Int8Rows(256)
    for X in _batches(3, 700, 256):  # past the first room (1,024 rows)
        state.index.add(X)
        commit_temp(_prepare_state(path, state), path)
        again = _load_state(path, config)
        n = len(state.index)
        assert again.rows_saved == {"vectors8": n, "scales": n}
        np.testing.assert_array_equal(again.index.floats(n), state.index.floats(n))
        Q, cand = X[:5], np.tile(np.arange(-1, 9), (5, 1))
        for a, b in zip(again.index.rank(Q, cand, 4), state.index.rank(Q, cand, 4), strict=True):
            np.testing.assert_array_equal(a, b)
        state = again
    assert path.stat().st_size < 4096  # the pickle holds no rows
