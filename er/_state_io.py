"""A writer's state as JSON and arrays, read back without running code from the file.

:func:`encode` walks an object graph and returns a JSON-ready tree beside the list of
numpy arrays it holds; :func:`decode` rebuilds the graph from the two. The checkpoint
(er/_checkpoint.py) writes the tree as JSON and the arrays as ``.npy`` files, read with
``allow_pickle=False``.

The tree is JSON's own values where they say everything (None, bool, int, finite
float, str, list); anything else is an object tagged by its ``"$"`` key:

============ ===============================================================
``tuple``    ``{"$": "tuple", "items": [...]}`` (``set``, ``frozenset`` alike)
``dict``     ``{"$": "dict", "map": {...}}`` when every key is a str, else
             ``{"$": "dict", "items": [[key, value], ...]}``; in insertion order
``float``    ``{"$": "float", "v": "nan"}`` (``"inf"``, ``"-inf"``)
``bytes``    ``{"$": "bytes", "b64": "..."}``
``array``    ``{"$": "array", "i": 3, "ro": false}``: array 3 (``3.npy``); a small
             one, ``{"$": "array", "at": [off, nbytes], "dtype": "<i8",
             "shape": [2, 3], "ro": false}``: bytes of the pool (array 0, uint8)
``scalar``   ``{"$": "scalar", "dtype": "<f4", "hex": "..."}``: a numpy number
``obj``      ``{"$": "obj", "module": ..., "name": ..., "attrs": {...}}``
``ref``      ``{"$": "ref", "n": 7}``: the 8th shared object met so far
============ ===============================================================

Shared references survive: lists, dicts, sets, arrays and er objects are numbered in
the order the walk meets them (the tree's document order, which the decoder follows),
and a second meeting is a ``ref`` to the first; the decoder registers each container
before its contents, so cycles through them come back too. Tuples and frozensets are
values (a cycle through one is refused).

An er object is one of the classes :func:`is_er_class` allows, saved as pickle saves
it (``__getstate__``: a dict of attributes, or ``(dict, slots)``) and rebuilt as
pickle rebuilds it (``object.__new__``, then ``__setstate__`` or the attributes set),
so the cores' own state hooks apply. Only er's classes are ever named: a file naming
anything else (``os.system``, ``numpy.memmap``, a dotted name) is refused before any
module is imported.
"""

from __future__ import annotations

import base64
import importlib
import math
import re
import sys
from collections.abc import Callable, Collection
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["POOL_MAX", "decode", "encode", "is_er_class", "is_er_module"]

# What a checkpoint may name: the classes defined in er's pure packages (its cores,
# index, pair model, ledger) and in the few modules below. The pipeline's stores,
# CLI and workers hold connections and run commands: none of their classes is data.
SAFE_PACKAGES = ("er.cluster", "er.ann", "er.match", "er.entities")
SAFE_MODULES = frozenset({"er.delta", "er.pipeline.state", "er._arrays"})
_MODULE = re.compile(r"er(\.[A-Za-z_][A-Za-z0-9_]*)+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # no dot: a dotted name walks to imports
# A class whose instances are not a plain attribute bag cannot be rebuilt as one.
_NOT_PLAIN = (list, dict, set, frozenset, tuple, str, bytes, int, float, np.ndarray, type)
_OBJECT_NEW: Any = object.__new__
# Arrays up to this many bytes (C-ordered numbers) go to one pool (array 0) instead of
# a .npy each: every file costs its own fsync (milliseconds) and GRINCH keeps ~2,000
# small root paths; a pooled array costs a copy when read, a larger one is read in place.
POOL_MAX = 2**20


def is_er_module(module: str) -> bool:
    """Whether ``module`` may hold classes a checkpoint names (:data:`SAFE_PACKAGES`,
    :data:`SAFE_MODULES`)."""
    return _MODULE.fullmatch(module) is not None and (
        module in SAFE_MODULES
        or module in SAFE_PACKAGES
        or module.startswith(tuple(p + "." for p in SAFE_PACKAGES))
    )


def is_er_class(cls: type) -> bool:
    """Whether instances of ``cls`` may be saved and rebuilt: a top-level class of an
    er module (:func:`is_er_module`) made by ``object.__new__``, holding attributes
    (not a container, an exception or a class), pickled by the default protocol."""
    return (
        is_er_module(cls.__module__)
        and _NAME.fullmatch(cls.__qualname__) is not None
        and cls.__new__ is _OBJECT_NEW
        and not issubclass(cls, (*_NOT_PLAIN, BaseException))
        and cls.__reduce_ex__ is object.__reduce_ex__
        and cls.__reduce__ is object.__reduce__
    )


def _find_class(module: str, name: str) -> type:
    """The er class ``module.name``; ValueError, before any import, for anything else."""
    if not (is_er_module(module) and _NAME.fullmatch(name)):
        raise ValueError(f"a checkpoint may not name {module}.{name}")
    found = getattr(sys.modules.get(module) or importlib.import_module(module), name, None)
    if not (
        isinstance(found, type)
        and found.__module__ == module
        and found.__qualname__ == name
        and is_er_class(found)
    ):
        raise ValueError(f"a checkpoint may not name {module}.{name}")
    return found


def _is_plain(value: object) -> bool:
    """Whether ``value`` is JSON's own scalar (a float only when finite)."""
    t = type(value)
    if t is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    return value is None or t is str or t is int or t is bool


_PLAIN = frozenset({str, int, bool, float, type(None)})


def _all_plain(values: Collection[Any]) -> bool:
    """Whether every one of ``values`` is :func:`_is_plain` (type checks in C: a table's
    vocabulary holds a string per distinct value)."""
    kinds = set(map(type, values))
    if not kinds <= _PLAIN:
        return False
    return float not in kinds or all(math.isfinite(v) for v in values if type(v) is float)


class _Encoder:
    """One walk of :func:`encode`: the arrays met and the shared-object numbers."""

    def __init__(self) -> None:
        self.arrays: list[NDArray[Any]] = [np.zeros(0, np.uint8)]  # the pool, made last
        self.pool: list[bytes] = []
        self.pooled = 0  # bytes
        self.memo: dict[int, int] = {}
        # every numbered object stays alive until the walk ends: a temporary one
        # (a __getstate__ copy) freed early would lend its id() to the next
        self.alive: list[object] = []
        self.open_values: set[int] = set()  # tuples and frozensets being walked

    def shared(self, obj: object) -> dict[str, Any] | None:
        """A ``ref`` if ``obj`` was met before; else number it and return None."""
        n = self.memo.get(id(obj))
        if n is not None:
            return {"$": "ref", "n": n}
        self.memo[id(obj)] = len(self.alive)
        self.alive.append(obj)
        return None

    def value(self, obj: Any) -> Any:
        t = type(obj)
        if _is_plain(obj):
            return obj
        if t is float:
            return {"$": "float", "v": repr(obj)}
        if t in (list, dict, set, np.ndarray) or is_er_class(t):
            ref = self.shared(obj)
            if ref is not None:
                return ref
            if t is list:
                return obj if _all_plain(obj) else [self.value(v) for v in obj]
            if t is dict:
                return self.mapping(obj)
            if t is set:
                return {"$": "set", "items": [self.value(v) for v in obj]}
            if t is np.ndarray:
                return self.array(obj)
            return self.instance(obj)
        if t is tuple or t is frozenset:
            if id(obj) in self.open_values:
                raise ValueError(f"a {t.__name__} that contains itself cannot be saved")
            self.open_values.add(id(obj))
            try:
                return {"$": t.__name__, "items": [self.value(v) for v in obj]}
            finally:
                self.open_values.discard(id(obj))
        if t is bytes:
            return {"$": "bytes", "b64": base64.b64encode(obj).decode("ascii")}
        if isinstance(obj, np.generic) and obj.dtype.kind in "biufc":
            return {"$": "scalar", "dtype": obj.dtype.str, "hex": obj.tobytes().hex()}
        raise ValueError(f"a checkpoint cannot hold a {t.__module__}.{t.__qualname__}")

    def mapping(self, obj: dict[Any, Any]) -> dict[str, Any]:
        if all(type(k) is str for k in obj):
            if _all_plain(obj.values()):
                return {"$": "dict", "map": obj}
            return {"$": "dict", "map": {k: self.value(v) for k, v in obj.items()}}
        return {"$": "dict", "items": [[self.value(k), self.value(v)] for k, v in obj.items()]}

    def array(self, obj: NDArray[Any]) -> dict[str, Any]:
        if obj.dtype.hasobject:  # .npy files of Python objects are pickles
            raise ValueError(f"a checkpoint cannot hold an array of dtype {obj.dtype}")
        ro = not obj.flags.writeable
        if obj.nbytes > POOL_MAX or obj.dtype.kind not in "biufc" or not obj.flags.c_contiguous:
            self.arrays.append(obj)
            return {"$": "array", "i": len(self.arrays) - 1, "ro": ro}
        at = [self.pooled, obj.nbytes]
        self.pool.append(obj.tobytes())
        self.pooled += obj.nbytes
        return {"$": "array", "at": at, "dtype": obj.dtype.str, "shape": list(obj.shape), "ro": ro}

    def instance(self, obj: Any) -> dict[str, Any]:
        cls = type(obj)
        state = obj.__getstate__()  # the class's own hook, as pickle calls it
        slots: dict[str, Any] = {}
        if isinstance(state, tuple) and len(state) == 2:  # (dict or None, slots)
            state, slots = state
        if not isinstance(state, dict | None) or not isinstance(slots, dict | None):
            raise ValueError(f"{cls.__qualname__}.__getstate__ gave no attribute dict")
        out: dict[str, Any] = {"$": "obj", "module": cls.__module__, "name": cls.__qualname__}
        out["attrs"] = {_attr(k): self.value(v) for k, v in (state or {}).items()}
        if slots:
            out["slots"] = {_attr(k): self.value(v) for k, v in slots.items()}
        return out


def _attr(name: object) -> str:
    if type(name) is not str:
        raise ValueError(f"an attribute name must be a str, not {type(name).__name__}")
    return name


def encode(obj: Any) -> tuple[Any, list[NDArray[Any]]]:
    """``obj`` as a JSON-ready tree and the arrays it holds.

    Parameters
    ----------
    obj : object
        Built of None, bool, int, float, str, bytes, list, tuple, dict, set,
        frozenset, numpy arrays (no object dtype) and numbers, and er objects
        (:func:`is_er_class`).

    Returns
    -------
    tree : JSON-ready value
        For ``json.dumps(..., allow_nan=False)``.
    arrays : list of ndarray
        The arrays the tree refers to by position, each once (not copied).

    Raises
    ------
    ValueError
        For anything else, naming its type.
    """
    walk = _Encoder()
    tree = walk.value(obj)
    walk.arrays[0] = np.frombuffer(b"".join(walk.pool), np.uint8)
    return tree, walk.arrays


_NODES = frozenset({list, dict})  # the JSON values that may hold a tagged node


class _Decoder:
    """One walk of :func:`decode`, numbering shared objects as :class:`_Encoder` did."""

    def __init__(self, array: Callable[[int], NDArray[Any]]) -> None:
        self.array = array
        self.memo: list[Any] = []
        self.pool: NDArray[np.uint8] | None = None

    def value(self, node: Any) -> Any:
        t = type(node)
        if t is list:
            out: list[Any] = []
            self.memo.append(out)
            if _NODES.isdisjoint(map(type, node)):  # JSON's scalars alone: as they are
                out.extend(node)
            else:
                out.extend(self.value(v) if type(v) in _NODES else v for v in node)
            return out
        if t is not dict:  # what else json.loads gives: None, bool, int, float, str
            return node
        kind = node["$"]
        if kind == "ref":
            return self.memo[_index(node["n"], len(self.memo))]
        if kind == "dict":
            return self.mapping(node)
        if kind == "obj":
            return self.instance(node)
        if kind == "array":
            arr = self.pooled(node) if "at" in node else self.array(_index(node["i"], None))
            if arr.dtype.hasobject:
                raise ValueError("a checkpoint array of Python objects")
            if node["ro"] is True:
                arr.setflags(write=False)
            self.memo.append(arr)
            return arr
        if kind == "set":
            made: set[Any] = set()
            self.memo.append(made)
            made.update(self.value(v) for v in _list(node["items"]))
            return made
        if kind in ("tuple", "frozenset"):
            items = [self.value(v) for v in _list(node["items"])]
            return tuple(items) if kind == "tuple" else frozenset(items)
        return _leaf(kind, node)

    def pooled(self, node: dict[str, Any]) -> NDArray[Any]:
        """A small array: its bytes in the pool, copied out (an array of its own)."""
        if self.pool is None:
            self.pool = self.array(0)
            if self.pool.dtype != np.uint8 or self.pool.ndim != 1:
                raise ValueError("a checkpoint pool that is not bytes")
        dtype = np.dtype(str(node["dtype"]))
        if dtype.kind not in "biufc":
            raise ValueError(f"a checkpoint array of dtype {dtype}")
        off, nbytes = (_index(v, None) for v in _list(node["at"]))
        shape = tuple(_index(v, None) for v in _list(node["shape"]))
        if off + nbytes > self.pool.size or nbytes != dtype.itemsize * math.prod(shape):
            raise ValueError("a checkpoint array past its pool")
        return np.frombuffer(self.pool[off : off + nbytes], dtype).reshape(shape).copy()

    def mapping(self, node: dict[str, Any]) -> dict[Any, Any]:
        made: dict[Any, Any] = {}
        self.memo.append(made)
        if "map" in node:
            for k, v in _dict(node["map"]).items():
                made[k] = self.value(v) if type(v) in _NODES else v
            return made
        for pair in _list(node["items"]):
            k, v = _list(pair)
            key = self.value(k)
            made[key] = self.value(v)
        return made

    def instance(self, node: dict[str, Any]) -> Any:
        cls = _find_class(str(node["module"]), str(node["name"]))
        obj: Any = object.__new__(cls)
        self.memo.append(obj)
        state = {str(k): self.value(v) for k, v in _dict(node["attrs"]).items()}
        slots = {str(k): self.value(v) for k, v in _dict(node.get("slots", {})).items()}
        setstate = getattr(cls, "__setstate__", None)
        if setstate is not None:  # the class's own hook, as pickle calls it
            setstate(obj, (state or None, slots) if slots else state)
            return obj
        if state:
            obj.__dict__.update(state)
        for name, value in slots.items():
            object.__setattr__(obj, name, value)
        return obj


def _leaf(kind: object, node: dict[str, Any]) -> Any:
    """The value of a tagged node that holds no other node."""
    if kind == "float":
        if node["v"] not in ("nan", "inf", "-inf"):
            raise ValueError(f"not a float: {node['v']!r}")
        return float(node["v"])
    if kind == "bytes":
        return base64.b64decode(str(node["b64"]), validate=True)
    if kind == "scalar":
        dtype = np.dtype(str(node["dtype"]))
        if dtype.kind not in "biufc":
            raise ValueError(f"a checkpoint scalar of dtype {dtype}")
        return np.frombuffer(bytes.fromhex(str(node["hex"])), dtype=dtype)[0]
    raise ValueError(f"unknown node {kind!r} in a checkpoint")


def _index(n: object, bound: int | None) -> int:
    if type(n) is not int or n < 0 or (bound is not None and n >= bound):
        raise ValueError(f"bad reference {n!r} in a checkpoint")
    return n


def _list(node: object) -> list[Any]:
    if type(node) is not list:
        raise ValueError("a checkpoint node without its list")
    return node


def _dict(node: object) -> dict[str, Any]:
    if type(node) is not dict:
        raise ValueError("a checkpoint node without its attributes")
    return node


def decode(tree: Any, array: Callable[[int], NDArray[Any]]) -> Any:
    """The object :func:`encode` gave ``tree`` for.

    Parameters
    ----------
    tree : JSON value
        As ``json.loads`` read it.
    array : callable
        The i-th array of the tree (read with ``allow_pickle=False``).

    Raises
    ------
    ValueError, KeyError, TypeError
        A tree :func:`encode` cannot have written, or one naming a class that is not
        er's (:func:`is_er_class`); nothing outside er is imported.
    """
    return _Decoder(array).value(tree)
