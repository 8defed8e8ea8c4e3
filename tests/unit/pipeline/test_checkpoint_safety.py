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


def _short(text: str) -> bytes:
    data = text.encode()
    return b"\x8c" + bytes([len(data)]) + data  # SHORT_BINUNICODE


def _call(module: str, name: str, *args: str) -> bytes:
    """A protocol-4 pickle that calls ``module``'s ``name`` (a dotted name walks from
    the module to what it imported) with one list of ``args``."""
    items = b"(" + b"".join(_short(a) for a in args) + b"e"  # MARK, items, APPENDS
    return b"\x80\x04" + _short(module) + _short(name) + b"\x93]" + items + b"\x85R."


@pytest.mark.parametrize(
    "make",
    [
        # numpy.f2py imports subprocess: a dotted name reaches Popen through it
        lambda t: _call("numpy.f2py", "subprocess.Popen", "touch", str(t)),
        lambda t: _call("er.cluster._mbscc", "np.save", str(t)),
        lambda t: _call("subprocess", "check_call", "touch", str(t)),
        # a numpy class that opens (and creates) any file the worker may write
        lambda t: pickle.dumps(_Reduces(np.memmap, (str(t), "uint8", "w+", 0, (4,))), protocol=4),
    ],
)
def test_what_a_crafted_pickle_names_is_refused(tmp_path: Path, make) -> None:
    target = tmp_path / "pwned"
    path = tmp_path / "checkpoint.pkl"
    path.write_bytes(make(target))
    with pytest.raises(ERError, match="not a checkpoint er can read"):
        _load_state(path, CONFIG)
    assert not target.exists()


class _Reduces:
    """Pickles as a call of ``fn`` with ``args``."""

    def __init__(self, fn: object, args: tuple[object, ...]) -> None:
        self.fn, self.args = fn, args

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (self.fn, self.args)


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
