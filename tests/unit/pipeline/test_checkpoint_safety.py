"""Nothing in the data dir runs as code (issue #54): a checkpoint is read by a loader
that rebuilds er's and numpy's classes only; collection names cannot leave the data dir."""

from __future__ import annotations

import os
import pickle
import stat
from pathlib import Path

import numpy as np
import pytest

from er.cluster import MBSCC
from er.exceptions import ConfigError, ERError
from er.pipeline import PIPELINE_PARAMS
from er.pipeline.config import check_collection_name
from er.pipeline.state import _load_state, _prepare_state, _State

CONFIG = {"algorithm": "mbscc", "params": {}}


class _WritesAFile:
    """A payload: unpickling it calls os.system, which would create ``target``."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.target}",))


@pytest.mark.parametrize(
    "payload",
    [
        lambda target: _WritesAFile(target),
        # hidden inside a real state, where the loader meets it late
        lambda target: _State(seq=1, core=_WritesAFile(target)),
        lambda target: {"state": [np.arange(3), _WritesAFile(target)]},
    ],
)
def test_a_hostile_checkpoint_runs_no_code(tmp_path: Path, payload) -> None:
    target = tmp_path / "pwned"
    path = tmp_path / "checkpoint.pkl"
    path.write_bytes(pickle.dumps(payload(target)))
    # the payload works under a plain unpickler: the test's own check
    plain = tmp_path / "plain"
    pickle.loads(pickle.dumps(_WritesAFile(plain)))
    assert plain.exists()
    with pytest.raises(ERError, match="not a checkpoint er can read"):
        _load_state(path, CONFIG)
    assert not target.exists()


def test_a_real_checkpoint_loads_and_is_private(tmp_path: Path) -> None:
    from er._checkpoint import commit_temp

    core = MBSCC(**PIPELINE_PARAMS["mbscc"], k=3)
    core.fit(np.random.default_rng(0).normal(size=(40, 8)))
    path = tmp_path / "collections" / "c" / "checkpoint.pkl"
    state = _State(seq=3, core=core, n_points=40)
    commit_temp(_prepare_state(path, state), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    loaded = _load_state(path, CONFIG)
    assert loaded.seq == 3
    np.testing.assert_array_equal(loaded.core.hierarchy_.parents(), core.hierarchy_.parents())


@pytest.mark.parametrize("name", ["", ".", "..", ".hidden", "a/b", "../up", "a b", "x" * 129, "é"])
def test_bad_collection_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="collection name"):
        check_collection_name(name)


@pytest.mark.parametrize("name", ["people", "people-2026.v1", "_tmp", "A_b-c.d", "x" * 128])
def test_good_collection_names_pass(name: str) -> None:
    assert check_collection_name(name) == name
