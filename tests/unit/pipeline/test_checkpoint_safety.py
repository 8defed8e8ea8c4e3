"""Nothing in the data dir runs as code (issue #54): a checkpoint is JSON and arrays read
without pickle, naming er's classes only; an old pickled one is read by a loader that
rebuilds er's and numpy's classes only; a checkpoint is its collection's and private;
collection names cannot leave the data dir."""

from __future__ import annotations

import json
import os
import pickle
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from er._checkpoint import Owner, commit_temp
from er.ann import batch_neighbors, make_index
from er.cluster import MBSCC, normalize_rows
from er.exceptions import ConfigError, ERError
from er.pipeline import PIPELINE_PARAMS
from er.pipeline.config import check_collection_name
from er.pipeline.state import _load_state, _prepare_state, _State

CONFIG = {"algorithm": "mbscc", "params": {}}
OWNER = Owner(3, "c")


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
    path = tmp_path / "checkpoint.json"
    path.with_suffix(".pkl").write_bytes(pickle.dumps(payload(target)))
    # the payload works under a plain unpickler: the test's own check
    plain = tmp_path / "plain"
    pickle.loads(pickle.dumps(_WritesAFile(plain)))
    assert plain.exists()
    with pytest.raises(ERError, match="not a checkpoint er can read"):
        _load_state(path, CONFIG, OWNER)
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
    path = tmp_path / "checkpoint.json"
    path.with_suffix(".pkl").write_bytes(make(target))
    with pytest.raises(ERError, match="not a checkpoint er can read"):
        _load_state(path, CONFIG, OWNER)
    assert not target.exists()


class _Reduces:
    """Pickles as a call of ``fn`` with ``args``."""

    def __init__(self, fn: object, args: tuple[object, ...]) -> None:
        self.fn, self.args = fn, args

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (self.fn, self.args)


def _real(tmp_path: Path) -> Path:
    """A real checkpoint of OWNER (MBSCC with the pipeline's parameters, its k-NN index,
    entity ledger); its JSON's path."""
    X = normalize_rows(np.random.default_rng(0).normal(size=(40, 8)).astype(np.float32))
    state = _State(seq=3, core=MBSCC(**PIPELINE_PARAMS["mbscc"], k=3), n_points=40)
    state.index = make_index("exact", dim=8)
    state.core.partial_fit(X, neighbors=batch_neighbors(state.index, X, 3))
    path = tmp_path / "collections" / "c" / "checkpoint.json"
    commit_temp(_prepare_state(path, state, OWNER), path)
    return path


def _rewrite(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


def test_a_real_checkpoint_loads_and_every_file_is_private(tmp_path: Path) -> None:
    folder = tmp_path / "collections" / "c"
    folder.mkdir(parents=True)
    folder.chmod(0o755)  # as an older release left it
    (folder / "checkpoint.vectors.f32").touch(mode=0o644)
    umask = os.umask(0o022)
    try:
        path = _real(tmp_path)
        state = _load_state(path, CONFIG, OWNER)
        commit_temp(_prepare_state(path, state, OWNER), path)  # a second save
    finally:
        os.umask(umask)
    names = sorted(p.name for p in folder.iterdir())
    assert names == [
        "checkpoint.2",
        "checkpoint.json",
        "checkpoint.points.f32",
        "checkpoint.vectors.f32",
    ]
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert len(files) >= 4 and {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o600}
    folders = [folder, *(p for p in folder.rglob("*") if p.is_dir())]
    assert len(folders) == 2 and {stat.S_IMODE(p.stat().st_mode) for p in folders} == {0o700}
    loaded = _load_state(path, CONFIG, OWNER)
    assert loaded.seq == 3
    np.testing.assert_array_equal(loaded.core.hierarchy_.parents(), state.core.hierarchy_.parents())


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("os", "system"),
        ("subprocess", "Popen"),
        ("numpy", "memmap"),  # opens (and creates) any file the worker may write
        ("builtins", "eval"),
        ("er.cluster._mbscc", "np.save"),  # a dotted name walks to what er imported
        ("er.cluster._mbscc", "np"),  # a module er imported, not a class
        ("er.cluster._mbscc", "match_ids"),  # a function
        ("er.cluster._mbscc", "_Members.from_sets"),
        ("er.stores.sql", "Collection"),  # er's, but not data
        ("er.pipeline.stores", "GraphStore"),
        ("this", "s"),  # importing it prints the Zen of Python
        ("er.cluster.nope", "X"),
        ("er.cluster/../os", "system"),
    ],
)
def test_a_checkpoint_naming_anything_but_an_er_class_is_refused(
    tmp_path: Path, module: str, name: str
) -> None:
    path = _real(tmp_path)
    target = tmp_path / "pwned"
    attrs = {"filename": str(target), "mode": "w+", "args": ["touch", str(target)]}
    hostile = {"$": "obj", "module": module, "name": name, "attrs": attrs}
    _rewrite(path, lambda doc: doc["state"]["attrs"].__setitem__("core", hostile))
    before = set(sys.modules)
    with pytest.raises(ERError, match="not a checkpoint er can read") as refused:
        _load_state(path, CONFIG, OWNER)
    assert "\n" not in str(refused.value)
    assert not target.exists()
    assert set(sys.modules) - before == set()  # nothing was imported


def test_an_array_of_python_objects_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    """The arrays are read with allow_pickle=False: an .npy of objects (a pickle inside)
    is refused, though the same file run through a plain np.load writes the file."""
    path = _real(tmp_path)
    folder = path.with_name(json.loads(path.read_text())["arrays"])
    payload = np.empty(1, dtype=object)
    payload[0] = _WritesAFile(tmp_path / "pwned")
    np.save(folder / "1.npy", payload, allow_pickle=True)  # an .npy that holds a pickle
    live = np.empty(1, dtype=object)
    live[0] = _WritesAFile(tmp_path / "plain")
    np.save(tmp_path / "live.npy", live, allow_pickle=True)
    np.load(tmp_path / "live.npy", allow_pickle=True)  # the payload works
    assert (tmp_path / "plain").exists()
    _rewrite(path, lambda doc: doc["state"]["attrs"].__setitem__("seq", {"$": "array", "i": 1}))
    with pytest.raises(ERError, match="Object arrays cannot be loaded when allow_pickle=False"):
        _load_state(path, CONFIG, OWNER)
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("owner", [Owner(4, "c"), Owner(3, "d")])
def test_another_collections_checkpoint_is_refused(tmp_path: Path, owner: Owner) -> None:
    path = _real(tmp_path)
    with pytest.raises(ERError, match=r"the checkpoint of collection \{'id': 3, 'name': 'c'\}"):
        _load_state(path, CONFIG, owner)


def test_a_newer_format_is_refused_with_one_line(tmp_path: Path) -> None:
    path = _real(tmp_path)
    _rewrite(path, lambda doc: doc.__setitem__("version", 2))
    with pytest.raises(ERError, match="format 2 by a newer er") as refused:
        _load_state(path, CONFIG, OWNER)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    "edit",
    [
        lambda doc: doc.__setitem__("arrays", "../../elsewhere"),
        lambda doc: doc.__setitem__("arrays", "checkpoint.9"),  # not there
        lambda doc: doc.__setitem__("arrays", "checkpoint.json"),
        lambda doc: doc.__setitem__("format", "something else"),
        lambda doc: doc["state"]["attrs"].__setitem__("seq", {"$": "ref", "n": 10**6}),
        lambda doc: doc["state"]["attrs"].__setitem__("seq", {"$": "float", "v": "1e5"}),
        lambda doc: doc["state"]["attrs"].__setitem__("seq", {"$": "scalar", "dtype": "O"}),
        lambda doc: doc.__setitem__("state", {"$": "dict", "map": {}}),  # not a state
    ],
)
def test_a_malformed_checkpoint_is_one_error_line(tmp_path: Path, edit: Any) -> None:
    path = _real(tmp_path)
    _rewrite(path, edit)
    with pytest.raises(ERError, match=r"not .*checkpoint") as refused:
        _load_state(path, CONFIG, OWNER)
    assert "\n" not in str(refused.value)


def _knn_attrs(doc: dict[str, Any]) -> dict[str, Any]:
    attrs: dict[str, Any] = doc["state"]["attrs"]["core"]["attrs"]["_knn"]["attrs"]
    return attrs


@pytest.mark.parametrize(
    "edit",
    [
        lambda doc: doc["state"]["attrs"].__setitem__("rows_saved", None),
        lambda doc: doc["state"]["attrs"].__setitem__("rows_saved", 0),
        lambda doc: doc["state"]["attrs"]["rows_saved"]["map"].__setitem__("points", None),
        lambda doc: doc["state"]["attrs"]["rows_saved"]["map"].__setitem__("vectors", "x"),
        lambda doc: doc["state"]["attrs"]["rows_saved"]["map"].__setitem__("points", -1),
        lambda doc: doc["state"].__setitem__("attrs", {}),
        lambda doc: _knn_attrs(doc)["X"]["shape"].__setitem__(1, 0),  # rows of no width
    ],
)
def test_malformed_row_counts_are_one_error_line(tmp_path: Path, edit: Any) -> None:
    """The row logs' counts and places (found by the fuzz test below: a TypeError, a
    ZeroDivisionError or an AttributeError got out)."""
    path = _real(tmp_path)
    _rewrite(path, edit)
    with pytest.raises(ERError) as refused:
        _load_state(path, CONFIG, OWNER)
    assert "\n" not in str(refused.value)


def test_a_torn_checkpoint_is_one_error_line(tmp_path: Path) -> None:
    path = _real(tmp_path)
    path.write_bytes(path.read_bytes()[:500])
    with pytest.raises(ERError, match="not a checkpoint er can read"):
        _load_state(path, CONFIG, OWNER)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=st.integers(0, 10**9), value=_json)
def test_any_node_replaced_loads_or_is_one_error_line(
    tmp_path_factory: Any, where: int, value: Any
) -> None:
    """Whatever a node of a real checkpoint is replaced by, the load gives a state or one
    ERError line: never another exception, never a traceback."""
    path = _real(tmp_path_factory.mktemp("fuzz"))
    doc = json.loads(path.read_text())
    slots: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            slots.append((node, key))
            if isinstance(child, dict | list):
                walk(child)

    walk(doc["state"])
    parent, key = slots[where % len(slots)]
    parent[key] = value
    path.write_text(json.dumps(doc))
    try:
        _load_state(path, CONFIG, OWNER)
    except ERError as exc:
        assert "\n" not in str(exc)


@pytest.mark.parametrize("name", ["", ".", "..", ".hidden", "a/b", "../up", "a b", "x" * 129, "é"])
def test_bad_collection_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="collection name"):
        check_collection_name(name)


@pytest.mark.parametrize("name", ["people", "people-2026.v1", "_tmp", "A_b-c.d", "x" * 128])
def test_good_collection_names_pass(name: str) -> None:
    assert check_collection_name(name) == name
