"""The writer's checkpoint: a small pickle beside append-only files of vector rows.

The big matrices of a writer's state (the core's points, the k-NN index's vectors:
n x d float32 each; the blocking keys, n x 55 int64) only ever grow at the end: a
row, once added, never changes. Pickling them with the rest made every checkpoint
O(n d) bytes (800 MB at 100k mentions of 1,024 dimensions). Instead each one lives in
its own file of raw rows, ``<checkpoint>.<name>.f32`` (``.i64``), and a save writes
only the rows added since the last save; the pickle holds everything else and the
number of rows of each file that belong to it.

A save is ordered so that a crash anywhere leaves a consistent checkpoint:

1. each file: write rows ``saved..n-1`` at offset ``saved`` (overwriting any debris
   of a save that died), cut the file at ``n`` rows, fsync;
2. the pickle: write a temporary file, fsync, rename over the old one, fsync the
   directory.

The writer does steps 1 and 2 up to the rename (:func:`dump_temp`) before the batch's
graph write starts, and renames (:func:`commit_temp`) only once that write has
succeeded: the checkpoint never claims a batch the graph does not hold.

A crash before the rename leaves the old pickle, whose counts ignore the rows past
them; after it, every row the new pickle counts is on disk.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from er.exceptions import ERError

__all__ = ["RowLog", "attach", "commit_temp", "detached", "dump_atomic", "dump_temp", "save_rows"]


@dataclass(frozen=True)
class RowLog:
    """Where one append-only matrix lives in a state object.

    Attributes
    ----------
    name : str
        Names the file, ``<checkpoint>.<name>.f32`` (``.i64``, ``.i8``).
    path : tuple of str
        Attribute path from the state to the array, e.g. ``("core", "_knn", "X")``.
    rows_attr : str or None
        Attribute (of the array's owner) counting the rows in use, when the array
        has spare capacity beyond them (``VectorIndex._n``); None: every row is used.
    dtype : {"float32", "int64", "int8"}
        The matrix's type (vectors; blocking keys, ``er.ann.KeyIndex``; the keys'
        quantized vectors, ``er.ann.Int8Rows``).
    """

    name: str
    path: tuple[str, ...]
    rows_attr: str | None = None
    dtype: str = "float32"

    def owner(self, state: Any) -> Any:
        """The object holding the array, or None if the state has no such path."""
        obj = state
        for attr in self.path[:-1]:
            obj = getattr(obj, attr, None)
            if obj is None:
                return None
        return obj

    def rows(self, state: Any) -> NDArray[Any] | None:
        """(n, d) the rows in use, or None when the state holds no such matrix."""
        owner = self.owner(state)
        X = getattr(owner, self.path[-1], None) if owner is not None else None
        if not isinstance(X, np.ndarray) or X.ndim != 2 or X.dtype != np.dtype(self.dtype):
            return None
        n = X.shape[0] if self.rows_attr is None else int(getattr(owner, self.rows_attr))
        return X[:n]

    def file(self, checkpoint: Path) -> Path:
        suffix = {"float32": "f32", "int64": "i64", "int8": "i8"}[self.dtype]
        return checkpoint.with_name(f"{checkpoint.name}.{self.name}.{suffix}")


def save_rows(checkpoint: Path, log: RowLog, X: NDArray[Any], saved: int) -> None:
    """Write rows ``X[saved:]`` at their place in the log's file; cut it at ``len(X)``.

    Parameters
    ----------
    X : ndarray of shape (n, d), the log's dtype
        All rows; the first ``saved`` are on disk already.
    """
    row = X.shape[1] * X.itemsize
    fd = os.open(log.file(checkpoint), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        with os.fdopen(os.dup(fd), "r+b") as f:
            f.seek(saved * row)
            f.write(np.ascontiguousarray(X[saved:]).tobytes())
            f.flush()
        os.ftruncate(fd, X.shape[0] * row)
        os.fsync(fd)
    finally:
        os.close(fd)


def _load_rows(checkpoint: Path, log: RowLog, n: int, dim: int) -> NDArray[Any]:
    """(n, dim) the first ``n`` rows of the log's file (rows past them are debris)."""
    path = log.file(checkpoint)
    dtype = np.dtype(log.dtype)
    have = path.stat().st_size // (dtype.itemsize * dim) if path.exists() else 0
    if have < n:
        raise ERError(
            f"{path}: holds {have} rows, the checkpoint counts {n}; "
            "move the collection's checkpoint files away to rebuild it."
        )
    return np.fromfile(path, dtype=dtype, count=n * dim).reshape(n, dim)


@contextmanager
def detached(state: Any, logs: tuple[RowLog, ...]) -> Iterator[dict[str, NDArray[Any]]]:
    """Swap each log's array for an empty (0, d) one while the block pickles ``state``.

    Yields the rows in use by log name; the arrays are put back on exit.
    """
    taken: list[tuple[Any, str, NDArray[Any]]] = []
    rows: dict[str, NDArray[Any]] = {}
    try:
        for log in logs:
            X = log.rows(state)
            if X is None:
                continue
            owner = log.owner(state)
            full = getattr(owner, log.path[-1])
            taken.append((owner, log.path[-1], full))
            setattr(owner, log.path[-1], np.zeros((0, X.shape[1]), X.dtype))
            rows[log.name] = X
        yield rows
    finally:
        for owner, attr, full in taken:
            setattr(owner, attr, full)


def attach(state: Any, checkpoint: Path, log: RowLog, n: int) -> None:
    """Load the first ``n`` rows of the log's file into the place :func:`detached`
    emptied (its (0, d) placeholder gives d)."""
    owner = log.owner(state)
    empty = getattr(owner, log.path[-1], None) if owner is not None else None
    if not isinstance(empty, np.ndarray) or empty.ndim != 2:
        raise ERError(
            f"{checkpoint}: rows {log.name!r} saved for a state without a place for them."
        )
    setattr(owner, log.path[-1], _load_rows(checkpoint, log, n, empty.shape[1]))


def dump_atomic(path: Path, obj: Any) -> None:
    """Pickle ``obj``: write temp, fsync, rename, fsync the directory."""
    commit_temp(dump_temp(path, obj), path)


def dump_temp(path: Path, obj: Any) -> Path:
    """Pickle ``obj`` into ``path``'s temporary file and fsync it; return that file.

    Nothing is replaced yet: until :func:`commit_temp`, ``path`` is the old checkpoint
    (a crash leaves the temporary file as debris that the next save overwrites).
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    # the writer's own file: readable by its user alone (it holds every record's fields)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # a temporary file left by an older release kept its mode
    with os.fdopen(fd, "wb") as f:
        pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)
        f.flush()
        os.fsync(f.fileno())
    return tmp


# What a checkpoint may name when it is read (:func:`safe_load`): the classes defined in
# er's pure packages (its cores, index, pair model, ledger and the state itself), numpy's
# and scipy's array classes by name, and the few functions their pickles rebuild arrays
# with. Anything else (os.system, builtins.eval, numpy.memmap, a name with a dot that
# would walk to an imported module) stops the load before any module is imported:
# whoever can write the data dir must not run code as the worker.
_SAFE_PACKAGES = ("er.cluster", "er.ann", "er.match", "er.entities")
_SAFE_MODULES = frozenset({"er.delta", "er.pipeline.state", "er._arrays"})
_SAFE_CALLABLES = frozenset(
    {
        ("copyreg", "_reconstructor"),
        ("copyreg", "__newobj__"),
        ("builtins", "object"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "slice"),
        ("builtins", "complex"),
        ("builtins", "bytearray"),
        ("collections", "OrderedDict"),
        ("er.pipeline", "_State"),  # checkpoints pickled before er/pipeline.py was split
        ("numpy", "dtype"),
        ("numpy", "ndarray"),
        *(
            (f"numpy.{core}.{module}", name)
            for core in ("core", "_core")
            for module, name in (
                ("multiarray", "_reconstruct"),
                ("multiarray", "scalar"),
                ("numeric", "_frombuffer"),
            )
        ),
        ("numpy.random._pickle", "__generator_ctor"),
        ("numpy.random._pickle", "__bit_generator_ctor"),
        ("numpy.random._pickle", "__randomstate_ctor"),
        ("numpy.random._pcg64", "PCG64"),
        ("numpy.random._mt19937", "MT19937"),
        ("numpy.random._philox", "Philox"),
        ("numpy.random._sfc64", "SFC64"),
        ("numpy.random.bit_generator", "SeedSequence"),
        ("numpy.random._generator", "Generator"),
        *(
            (f"scipy.sparse._{fmt}", f"{fmt}_{kind}")
            for fmt in ("csr", "csc", "coo", "lil", "dok", "bsr", "dia")
            for kind in ("array", "matrix")
        ),
    }
)


class _SafeUnpickler(pickle.Unpickler):
    """An unpickler that finds only :data:`_SAFE_CALLABLES` and the classes defined in
    er's safe modules; it refuses before importing anything else."""

    def find_class(self, module: str, name: str) -> Any:
        if "." not in name:
            if (module, name) in _SAFE_CALLABLES:
                return super().find_class(module, name)
            if (
                module in _SAFE_MODULES
                or module.startswith(tuple(p + "." for p in _SAFE_PACKAGES))
                or module in _SAFE_PACKAGES
            ):
                found = super().find_class(module, name)
                # a class er defines there: not a function, not a name it imported
                if isinstance(found, type) and found.__module__ == module:
                    return found
        raise pickle.UnpicklingError(f"a checkpoint may not name {module}.{name}")


def safe_load(f: Any) -> Any:
    """The object pickled in the open binary file ``f``, rebuilt from er's and numpy's
    classes alone (:class:`_SafeUnpickler`); pickle.UnpicklingError for anything else."""
    return _SafeUnpickler(f).load()


def commit_temp(tmp: Path, path: Path) -> None:
    """Rename the temporary file of :func:`dump_temp` over ``path``; fsync the directory."""
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
