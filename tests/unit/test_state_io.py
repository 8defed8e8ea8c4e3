"""The checkpoint's serializer (er/_state_io.py, through er/_checkpoint.py's files).

Oracle: the object itself, compared by a walk written here (types, values, array
dtypes, shapes, bytes and flags, and which objects are one object), not by the
serializer's own code.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from er._checkpoint import Owner, dump_atomic, load
from er._state_io import POOL_MAX, decode, encode
from er.delta import ClusteringDelta
from er.entities import ArrayLedger
from er.match._model import FieldWeights

OWNER = Owner(1, "c")

_IDENTITY = (list, dict, set, np.ndarray)  # kinds the serializer keeps shared


def _identity(a: Any) -> bool:
    return isinstance(a, _IDENTITY) or type(a).__module__.startswith("er.")


def same(a: Any, b: Any, seen: dict[int, int] | None = None) -> None:
    """Assert ``b`` equals ``a``, structure and sharing included."""
    seen = {} if seen is None else seen
    assert type(a) is type(b), (type(a), type(b))
    if _identity(a):
        if id(a) in seen:  # met before: must be the very object met then
            assert seen[id(a)] == id(b)
            return
        assert id(b) not in seen.values()  # two objects must not become one
        seen[id(a)] = id(b)
    if isinstance(a, np.ndarray):
        assert (a.dtype, a.shape, a.flags.writeable) == (b.dtype, b.shape, b.flags.writeable)
        assert a.tobytes() == b.tobytes()  # bit for bit: NaN payloads, -0.0
        if a.flags.f_contiguous and not a.flags.c_contiguous:
            assert b.flags.f_contiguous
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    elif isinstance(a, float):
        assert (math.isnan(a) and math.isnan(b)) or (a == b and str(a) == str(b))
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            same(x, y, seen)
    elif isinstance(a, dict):
        assert list(a) == list(b)  # insertion order too
        for k in a:
            same(k, next(kb for kb in b if kb == k), seen)
            same(a[k], b[k], seen)
    elif isinstance(a, set | frozenset):
        assert a == b
    elif type(a).__module__.startswith("er."):
        # attribute order is the class's __setstate__'s business (FieldWeights reorders)
        sa, sb = a.__getstate__(), b.__getstate__()
        assert sorted(sa) == sorted(sb)
        for k in sorted(sa):
            same(sa[k], sb[k], seen)
    else:
        assert a == b


# -- strategies ------------------------------------------------------------------------------
_DTYPES = [np.bool_, np.int8, np.uint16, np.int32, np.int64, np.uint64, np.float16]
_DTYPES += [np.float32, np.float64, np.complex64, np.complex128, np.dtype(">i4"), np.dtype("<f8")]


@st.composite
def arrays(draw: Any) -> np.ndarray:
    dtype = np.dtype(draw(st.sampled_from(_DTYPES)))
    big = draw(st.integers(0, 9)) == 0  # now and then past the pool: a .npy of its own
    shape = (
        (POOL_MAX // dtype.itemsize + draw(st.integers(1, 40)),)
        if big
        else draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))
    )
    arr = np.arange(shape[0]).astype(dtype) if big else draw(hnp.arrays(dtype, shape))
    form = draw(st.sampled_from(["c", "fortran", "strided", "readonly"]))
    if form == "fortran" and arr.ndim >= 2:
        arr = np.asfortranarray(arr)
    elif form == "strided" and arr.ndim >= 1:
        arr = arr[::2]
    elif form == "readonly":
        arr.setflags(write=False)
    return arr


_keys = st.one_of(
    st.integers(-(2**70), 2**70),
    st.text(st.characters(exclude_categories=())),  # lone surrogates too
    st.tuples(st.integers(), st.booleans()),
    st.binary(max_size=8),
    st.frozensets(st.integers(0, 9), max_size=3),
    st.floats(allow_nan=False),
    st.none(),
)
_leaves = st.one_of(
    _keys,
    st.floats(),  # NaN, the infinities, -0.0
    st.booleans(),
    arrays(),
    st.builds(lambda v, t: np.dtype(t).type(v), st.integers(0, 100), st.sampled_from(_DTYPES)),
)


@st.composite
def er_objects(draw: Any, children: st.SearchStrategy[Any]) -> Any:
    kind = draw(st.sampled_from(["ledger", "delta", "weights"]))
    if kind == "ledger":  # a plain class; any attribute it is given comes back
        members = draw(st.dictionaries(st.integers(1, 9), st.sets(st.integers(0, 50), max_size=3)))
        led = ArrayLedger(_disjoint(members), next_id=10, last_batch=draw(st.integers(0, 5)))
        led.extra = draw(children)
        return led
    if kind == "delta":  # a frozen dataclass of read-only arrays
        n = draw(st.integers(0, 4))
        return ClusteringDelta(
            node_id=np.arange(n),
            is_leaf=np.ones(n, bool),
            size=np.ones(n, np.int64),
            score=np.full(n, np.nan),
            level_lo=np.zeros(n, np.int32),
            level_hi=np.zeros(n, np.int32),
            algorithm=draw(st.text(max_size=5)),
        )
    m = tuple(draw(st.lists(st.floats(0.01, 1), min_size=2, max_size=4)))
    tf = draw(st.dictionaries(st.text(max_size=4), st.floats(0, 1), max_size=3))
    return FieldWeights(name="f", kind="exact", m=m, u=m, tf=tf)  # has __setstate__


def _disjoint(members: dict[int, set[int]]) -> dict[int, set[int]]:
    seen: set[int] = set()
    out = {}
    for e, ms in members.items():
        out[e] = ms - seen
        seen |= ms
    return {e: ms for e, ms in out.items() if ms}


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(_keys, children, max_size=4),
        st.dictionaries(st.text(max_size=3), children, max_size=4),
        st.sets(st.integers() | st.text(max_size=3), max_size=4),
        er_objects(children),
    )


values = st.recursive(_leaves, _containers, max_leaves=12)


@st.composite
def graphs(draw: Any) -> Any:
    """Values where some objects are met more than once, and some contain themselves."""
    parts = draw(st.lists(values, min_size=1, max_size=4))
    picks = draw(st.lists(st.integers(0, len(parts) - 1), max_size=6))
    doc: list[Any] = [*parts, *(parts[i] for i in picks)]
    doc.append({"again": [parts[i] for i in picks], "pair": (parts[0], parts[0])})
    if draw(st.booleans()):
        doc.append(doc)  # a cycle through a list
    if draw(st.booleans()):
        led = ArrayLedger()
        led.me = led  # a cycle through an er object
        doc.append(led)
    return doc


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=graphs())
def test_whatever_is_saved_loads_back_the_same(tmp_path_factory: Any, obj: Any) -> None:
    path = tmp_path_factory.mktemp("io") / "checkpoint.json"
    dump_atomic(path, obj, OWNER)
    same(obj, load(path, OWNER))


@settings(max_examples=100, deadline=None)
@given(obj=values)
def test_the_tree_is_strict_json_and_decodes_alone(obj: Any) -> None:
    tree, arrays = encode(obj)
    text = json.dumps(tree, allow_nan=False)  # no NaN or Infinity tokens
    assert all(not a.dtype.hasobject for a in arrays)
    same(obj, decode(json.loads(text), lambda i: arrays[i].copy(order="K")))


def _fn() -> None:
    pass


class _Foreign:
    pass


class _Reduced(ArrayLedger):  # an er class would need its own __reduce__: refused
    def __reduce__(self) -> Any:
        return (os.system, ("true",))


@pytest.mark.parametrize(
    "bad",
    [
        _fn,
        _Foreign(),
        {"k": [1, _Foreign()]},
        np.array([1, "a"], dtype=object),
        np.zeros(2, dtype=[("a", "O")]),
        np.memmap,
        bytearray(b"x"),
        np.datetime64("2020-01-01"),
        os.environ,
        sys,
    ],
    ids=repr,
)
def test_what_a_checkpoint_cannot_hold_is_refused_at_save(bad: Any, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot hold"):
        encode(bad)
    assert not (tmp_path / "checkpoint.json").exists()


def test_an_er_subclass_is_judged_on_its_own_module() -> None:
    # _Reduced lives in this test module, not in er: refused like any foreign class
    with pytest.raises(ValueError, match="cannot hold"):
        encode(_Reduced())


def test_a_tuple_that_contains_itself_is_refused() -> None:
    inner: list[Any] = []
    loop = (inner,)
    inner.append(loop)
    with pytest.raises(ValueError, match="contains itself"):
        encode(loop)
