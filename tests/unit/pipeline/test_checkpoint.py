"""The writer's checkpoint: JSON and arrays beside row logs (er/_checkpoint.py, pipeline).

Oracles: the state as last saved (kept in memory by the test), and cores, k-NN indexes
and entity ledgers stepped without any save/load in between.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from er._checkpoint import Owner, RowLog, commit_temp, detached, safe_load, save_rows
from er.ann import Int8Rows, batch_neighbors, make_index
from er.cluster import MBSCC, Grinch, Llama, normalize_rows
from er.exceptions import ERError
from er.pipeline import PIPELINE_PARAMS
from er.pipeline.state import _ROW_LOGS, _load_state, _point_nodes, _prepare_state, _State
from er.pipeline.writer import _entity_step

OWNER = Owner(7, "people")
CONFIG = {"algorithm": "mbscc", "params": {}}


def _vectors(state: _State) -> np.ndarray:
    return state.index.vectors


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 5), st.sampled_from(["no", "rows", "json"]), st.booleans()),
        min_size=1,
        max_size=8,
    ),
    seed=st.integers(0, 2**16),
)
def test_loading_after_any_crash_gives_the_last_completed_save(tmp_path_factory, steps, seed):
    """Each step appends rows and saves; a save may die after its rows reach their file
    (``rows``) or after the arrays and the temporary JSON are written, before the rename
    (``json``); a death, or a restart, continues from what is on disk."""
    path = tmp_path_factory.mktemp("ckpt") / "checkpoint.json"
    rng = np.random.default_rng(seed)
    state = _State(seq=0, core=None, index=make_index("exact", dim=3))
    commit_temp(_prepare_state(path, state, OWNER), path)
    last = _vectors(state).copy()
    for seq, (grow, dies, restart) in enumerate(steps, start=1):
        state.index.add(normalize_rows(rng.normal(size=(grow, 3)).astype(np.float32)))
        state.seq = seq
        if dies == "rows":  # the row logs of this save, and no more
            with detached(state, _ROW_LOGS) as rows:
                log = next(log for log in _ROW_LOGS if log.name == "vectors")
                save_rows(path.with_suffix(""), log, rows["vectors"], state.rows_saved["vectors"])
        elif dies == "json":
            _prepare_state(path, state, OWNER)
        else:
            commit_temp(_prepare_state(path, state, OWNER), path)
            last = _vectors(state).copy()
        if dies != "no" or restart:
            state = _load_state(path, CONFIG, OWNER)
            np.testing.assert_array_equal(_vectors(state), last)
    final = _load_state(path, CONFIG, OWNER)
    np.testing.assert_array_equal(_vectors(final), last)
    assert final.index.vectors.dtype == np.float32
    # the saves that died left no array folder behind once a later one was made current
    if steps[-1][1] == "no":
        current = json.loads(path.read_text())["arrays"]
        assert [p.name for p in _array_folders(path.parent)] == [current]


def _array_folders(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if re.fullmatch(r"checkpoint\.[0-9]+", p.name))


def test_a_row_file_shorter_than_the_count_is_an_error(tmp_path) -> None:
    path = tmp_path / "checkpoint.json"
    state = _State(seq=1, core=None, index=make_index("exact", dim=2))
    state.index.add(normalize_rows(np.ones((4, 2), np.float32)))
    commit_temp(_prepare_state(path, state, OWNER), path)
    (tmp_path / "checkpoint.vectors.f32").write_bytes(b"\0" * 8)  # one row of two float32
    with pytest.raises(ERError, match="holds 1 rows, the checkpoint counts 4"):
        _load_state(path, CONFIG, OWNER)


def _batches(n_batches: int, b: int, d: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(8, d))
    out = []
    for _ in range(n_batches):
        X = centers[rng.integers(0, 8, b)] + 0.3 * rng.normal(size=(b, d))
        out.append(normalize_rows(X.astype(np.float32)))
    return out


def _step(state: _State, X: np.ndarray) -> Any:
    """One batch as the writer steps it: index, core, entity ledger; the entity step."""
    if state.index is None:
        state.index = make_index("exact", dim=X.shape[1])
    neighbors = batch_neighbors(state.index, X, 10)
    if isinstance(state.core, MBSCC):  # the others search on their own, as in the writer
        state.core.partial_fit(X, neighbors=neighbors)
    else:
        state.core.partial_fit(X)
    state.seq += 1
    state.n_points += X.shape[0]
    state.ranges[state.seq] = (state.n_points - X.shape[0], state.n_points)
    return _entity_step(state, state.seq, _point_nodes(state.core, state.n_points), 0.5)


CORES = {
    "mbscc": lambda: MBSCC(**PIPELINE_PARAMS["mbscc"]),
    "grinch": Grinch,
    "llama": Llama,
}


@pytest.mark.parametrize("algorithm", sorted(CORES))
def test_a_state_saved_and_loaded_steps_like_one_never_saved(tmp_path, algorithm) -> None:
    """Save/load between batches changes nothing: same hierarchy, delta, node and entity
    ids, neighbours, for each core the pipeline runs."""
    path = tmp_path / "checkpoint.json"
    config = {"algorithm": algorithm, "params": {}}
    kept = _State(seq=0, core=CORES[algorithm]())  # as _load_state makes it
    reloaded = _load_state(path, config, OWNER)
    for X in _batches(5, 60, 64):
        kept_step = _step(kept, X)
        step = _step(reloaded, X)
        assert (step.joined, step.left, step.events) == (
            kept_step.joined,
            kept_step.left,
            kept_step.events,
        )
        commit_temp(_prepare_state(path, reloaded, OWNER), path)
        reloaded = _load_state(path, config, OWNER)
        np.testing.assert_array_equal(reloaded.index.vectors, kept.index.vectors)
        n = kept.n_points
        np.testing.assert_array_equal(_point_nodes(reloaded.core, n), _point_nodes(kept.core, n))
        np.testing.assert_array_equal(reloaded.core.hierarchy_.edges, kept.core.hierarchy_.edges)
        for name in ("node_id", "size", "score", "edges_added", "edges_retired", "retired"):
            np.testing.assert_array_equal(
                getattr(reloaded.core.delta_, name), getattr(kept.core.delta_, name)
            )
        np.testing.assert_array_equal(reloaded.ledger.entity_, kept.ledger.entity_)
        assert reloaded.ranges == kept.ranges and reloaded.ledger.next_id == kept.ledger.next_id
    # the vectors are in their row log, not in the checkpoint's arrays or JSON
    assert reloaded.rows_saved["vectors"] == kept.n_points
    assert (tmp_path / "checkpoint.vectors.f32").stat().st_size == kept.index.vectors.nbytes
    if algorithm == "mbscc":  # given the index's neighbours, MBSCC keeps no copy of them
        assert reloaded.rows_saved["points"] == 0
        held = sum(f.stat().st_size for f in tmp_path.glob("checkpoint.*/*.npy"))
        held += path.stat().st_size
        whole = len(pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL))
        assert held < whole - kept.index.vectors.nbytes + 65536


def test_the_file_names_its_format_version_and_collection(tmp_path) -> None:
    path = tmp_path / "checkpoint.json"
    state = _load_state(path, CONFIG, OWNER)
    _step(state, _batches(1, 30, 8)[0])
    commit_temp(_prepare_state(path, state, OWNER), path)
    doc = json.loads(path.read_text())
    assert (doc["format"], doc["version"], doc["collection"]) == (
        "er.checkpoint",
        1,
        {"id": 7, "name": "people"},
    )
    assert doc["state"]["module"] == "er.pipeline.state" and doc["state"]["name"] == "_State"
    assert doc["arrays"] == "checkpoint.1"
    assert sorted(p.name for p in (tmp_path / "checkpoint.1").iterdir())[0] == "0.npy"
    assert not any(p.suffix == ".pkl" for p in tmp_path.iterdir())


def _pickle_as_before(path: Path, state: _State, row_logs: bool = True) -> None:
    """A checkpoint as releases before this format wrote it: a plain pickle of the state
    at ``checkpoint.pkl``, its big matrices in ``checkpoint.pkl.<name>.<type>`` row files."""
    legacy = path.with_suffix(".pkl")
    if not row_logs:
        del state.__dict__["rows_saved"]
        legacy.write_bytes(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
        return
    with detached(state, _ROW_LOGS) as rows:
        for log in _ROW_LOGS:
            if log.name in rows:
                save_rows(legacy, log, rows[log.name], 0)
        saved, state.rows_saved = state.rows_saved, {k: X.shape[0] for k, X in rows.items()}
        legacy.write_bytes(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
        state.rows_saved = saved


@pytest.mark.parametrize("row_logs", [True, False], ids=["row-logs", "rows-inline"])
def test_an_old_pickled_checkpoint_is_read_once_and_saved_in_the_new_format(
    tmp_path, row_logs
) -> None:
    """A pickle of a real state (and its row files) is read by the restricted loader,
    saved again as JSON and arrays at once (the pickle and its row files removed), and
    the state steps on like one never saved."""
    path = tmp_path / "checkpoint.json"
    config = {"algorithm": "mbscc", "params": {}}
    kept = _State(seq=0, core=CORES["mbscc"]())
    batches = _batches(4, 60, 32)
    for X in batches[:2]:
        _step(kept, X)
    _pickle_as_before(path, pickle.loads(pickle.dumps(kept)), row_logs)
    assert (tmp_path / "checkpoint.pkl").exists()
    migrated = _load_state(path, config, OWNER)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "checkpoint.1",
        "checkpoint.json",
        "checkpoint.points.f32",
        "checkpoint.vectors.f32",
    ]
    assert migrated.rows_saved == {"points": 0, "vectors": 120}
    again = _load_state(path, config, OWNER)  # the new format now: no pickle read
    for X in batches[2:]:
        kept_step, step = _step(kept, X), _step(again, X)
        assert (step.joined, step.left, step.events) == (
            kept_step.joined,
            kept_step.left,
            kept_step.events,
        )
        np.testing.assert_array_equal(again.core.node_ids_, kept.core.node_ids_)
        np.testing.assert_array_equal(again.core.hierarchy_.edges, kept.core.hierarchy_.edges)
        np.testing.assert_array_equal(again.index.vectors, kept.index.vectors)


def test_a_checkpoint_pickled_before_the_package_split_loads() -> None:
    # Before issue #28 the state class was er.pipeline._State; data dirs hold such pickles.
    old = pickle.dumps(_State(seq=3, core=None), protocol=3)
    assert b"er.pipeline.state\n_State" in old
    old = old.replace(b"er.pipeline.state\n_State", b"er.pipeline\n_State")
    loaded = safe_load(io.BytesIO(old))
    assert isinstance(loaded, _State) and loaded.seq == 3


def test_the_keys_int8_vectors_go_to_row_logs_and_come_back(tmp_path) -> None:
    """A blocking-keys collection's int8 rows and scales are row logs, not in the JSON."""
    path = tmp_path / "checkpoint.json"
    state = _load_state(path, CONFIG, OWNER)
    state.index = Int8Rows(256)
    for X in _batches(3, 700, 256):  # past the first room (1,024 rows)
        state.index.add(X)
        commit_temp(_prepare_state(path, state, OWNER), path)
        again = _load_state(path, CONFIG, OWNER)
        n = len(state.index)
        assert again.rows_saved == {"vectors8": n, "scales": n}
        np.testing.assert_array_equal(again.index.floats(n), state.index.floats(n))
        Q, cand = X[:5], np.tile(np.arange(-1, 9), (5, 1))
        for a, b in zip(again.index.rank(Q, cand, 4), state.index.rank(Q, cand, 4), strict=True):
            np.testing.assert_array_equal(a, b)
        state = again
    held = path.stat().st_size + sum(f.stat().st_size for f in tmp_path.glob("*/*.npy"))
    assert held < 16384  # no rows


def test_row_log_names() -> None:
    log = RowLog("vectors", ("index", "_X"))
    assert log.file(Path("/d/checkpoint")) == Path("/d/checkpoint.vectors.f32")
    assert log.file(Path("/d/checkpoint.pkl")) == Path("/d/checkpoint.pkl.vectors.f32")
