"""The writer's checkpoint: JSON and ``.npy`` arrays beside append-only files of rows.

A checkpoint of a collection is, in the collection's folder of the data dir (0700):

- ``checkpoint.json``: the format (``"er.checkpoint"``), its version, the collection it
  belongs to (``{"id", "name"}``), the name of its array folder and the state's object
  graph as er/_state_io.py encodes it (JSON's values and tagged nodes);
- ``checkpoint.<n>/``: the graph's arrays, ``0.npy`` (the small ones' bytes, pooled),
  ``1.npy``, ..., read with ``allow_pickle=False``; ``n`` grows with every save (plain
  ``.npy`` files rather than one ``.npz``: a zip member costs a CRC pass on write and
  on read, and a copy on read);
- ``checkpoint.<name>.f32`` (``.i64``, ``.i8``): the big append-only matrices (the
  core's points, the k-NN index's vectors: n x d float32 each; the blocking keys, n x 55
  int64 for people, n x 33 per field of free text). A row, once added, never changes, so
  a save writes only the rows added since the last one; the graph holds the number of
  rows of each file that belong to it.
  (Saving them whole made every checkpoint O(n d) bytes: 800 MB at 100k mentions of
  1,024 dimensions.)

Every file is 0600 and every folder 0700: they hold every record's fields. Nothing in
them is code: the graph names only er's own classes (:func:`er._state_io.is_er_class`),
arrays are plain numbers, and a file naming anything else is refused before anything
is imported.

A save is ordered so that a crash anywhere leaves a consistent checkpoint:

1. each row file: write rows ``saved..n-1`` at offset ``saved`` (overwriting any debris
   of a save that died), cut the file at ``n`` rows, fsync;
2. the arrays: a new folder ``checkpoint.<n>`` (a name no current one has), each
   file fsynced, then the folder;
3. the JSON: a temporary file naming that folder, fsync, rename over
   ``checkpoint.json``, fsync the directory; then the array folders it does not name
   are removed.

The writer does steps 1, 2 and 3 up to the rename (:func:`dump_temp`) before the
batch's graph write starts, and renames (:func:`commit_temp`) only once that write has
succeeded: the checkpoint never claims a batch the graph does not hold. A crash before
the rename leaves the old JSON, whose array folder is still there and whose row counts
ignore the rows past them; after it, everything the new JSON counts is on disk.

Checkpoints of releases before this format were pickles (``checkpoint.pkl``, row files
``checkpoint.pkl.<name>.f32``); :func:`safe_load` reads one once, by an unpickler that
rebuilds er's and numpy's classes alone, and the writer saves it again in this format.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from er._state_io import decode, encode, is_er_module
from er.exceptions import ERError

__all__ = [
    "FORMAT",
    "VERSION",
    "Owner",
    "Prepared",
    "RowLog",
    "attach",
    "commit_temp",
    "detached",
    "dump_atomic",
    "dump_temp",
    "legacy_path",
    "load",
    "safe_load",
    "save_rows",
]

FORMAT = "er.checkpoint"
# The checkpoint format's version: a reader refuses a newer one, and reads every older one.
VERSION = 1


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

    def file(self, base: Path) -> Path:
        """``<base>.<name>.f32`` (``.i64``, ``.i8``); ``base`` is the checkpoint's path
        without its suffix (an old pickled checkpoint's: with it)."""
        suffix = {"float32": "f32", "int64": "i64", "int8": "i8"}[self.dtype]
        return base.with_name(f"{base.name}.{self.name}.{suffix}")


def save_rows(base: Path, log: RowLog, X: NDArray[Any], saved: int) -> None:
    """Write rows ``X[saved:]`` at their place in the log's file; cut it at ``len(X)``.

    Parameters
    ----------
    base : Path
        The checkpoint's path without its suffix (:meth:`RowLog.file`).
    X : ndarray of shape (n, d), the log's dtype
        All rows; the first ``saved`` are on disk already.
    """
    row = X.shape[1] * X.itemsize
    fd = os.open(log.file(base), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(os.dup(fd), "r+b") as f:
            f.seek(saved * row)
            f.write(np.ascontiguousarray(X[saved:]).tobytes())
            f.flush()
        os.ftruncate(fd, X.shape[0] * row)
        os.fsync(fd)
    finally:
        os.close(fd)


def _load_rows(base: Path, log: RowLog, n: int, dim: int) -> NDArray[Any]:
    """(n, dim) the first ``n`` rows of the log's file (rows past them are debris)."""
    path = log.file(base)
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
    """Swap each log's array for an empty (0, d) one while the block saves ``state``.

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


def attach(state: Any, base: Path, log: RowLog, n: int) -> None:
    """Load the first ``n`` rows of the log's file into the place :func:`detached`
    emptied (its (0, d) placeholder gives d)."""
    owner = log.owner(state)
    empty = getattr(owner, log.path[-1], None) if owner is not None else None
    if not isinstance(empty, np.ndarray) or empty.ndim != 2 or empty.shape[1] < 1:
        raise ERError(f"{base}: rows {log.name!r} saved for a state without a place for them.")
    setattr(owner, log.path[-1], _load_rows(base, log, n, empty.shape[1]))


@dataclass(frozen=True)
class Owner:
    """The collection a checkpoint belongs to: its file names it, a load checks it."""

    id: int
    name: str


@dataclass(frozen=True)
class Prepared:
    """A saved checkpoint not yet current (:func:`dump_temp`, :func:`commit_temp`)."""

    tmp: Path  # the JSON's temporary file
    arrays: Path  # the folder of arrays it names


def _arrays_pattern(path: Path) -> re.Pattern[str]:
    """The names of the array folders of checkpoint ``path`` (``checkpoint.<n>``)."""
    return re.compile(re.escape(path.stem) + r"\.([0-9]{1,18})")


def _private(path: Path) -> int:
    """A new (or emptied) file only its owner may read and write; its descriptor."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # a file left by an older release kept its mode
    return fd


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def dump_atomic(path: Path, obj: Any, owner: Owner) -> None:
    """Save ``obj`` as ``owner``'s checkpoint ``path`` (``checkpoint.json``) and make it
    current: :func:`dump_temp` then :func:`commit_temp`."""
    commit_temp(dump_temp(path, obj, owner), path)


def dump_temp(path: Path, obj: Any, owner: Owner) -> Prepared:
    """Write ``obj``'s arrays (a new folder of ``.npy`` files) and JSON (its temporary
    file), each fsynced.

    Nothing is replaced yet: until :func:`commit_temp`, ``path`` is the old checkpoint (a
    crash leaves the new folder and the temporary JSON as debris, which the next save
    passes over and the next commit removes).

    Raises
    ------
    ValueError
        ``obj`` holds something a checkpoint cannot (er/_state_io.py, :func:`encode`).
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)  # a folder made by an older release kept its mode
    tree, arrays = encode(obj)
    pattern = _arrays_pattern(path)
    taken = [int(m[1]) for f in os.listdir(path.parent) if (m := pattern.fullmatch(f))]
    folder = path.with_name(f"{path.stem}.{max(taken, default=0) + 1}")
    folder.mkdir(mode=0o700)
    for i, arr in enumerate(arrays):
        with os.fdopen(_private(folder / f"{i}.npy"), "wb") as f:
            np.lib.format.write_array(f, arr, allow_pickle=False)
            f.flush()
            os.fsync(f.fileno())
    _fsync_dir(folder)
    header = {"format": FORMAT, "version": VERSION, "collection": vars(owner)}
    text = json.dumps({**header, "arrays": folder.name, "state": tree}, allow_nan=False)
    tmp = path.with_name(path.name + ".tmp")
    with os.fdopen(_private(tmp), "wb") as f:
        f.write(text.encode("ascii"))  # json.dumps escapes every non-ASCII character
        f.flush()
        os.fsync(f.fileno())
    return Prepared(tmp, folder)


def commit_temp(prepared: Prepared, path: Path) -> None:
    """Make the checkpoint of :func:`dump_temp` current: rename its JSON over ``path``,
    fsync the directory; then remove the array folders it does not name and the files
    of an old pickled checkpoint (:func:`legacy_path`)."""
    os.replace(prepared.tmp, path)
    _fsync_dir(path.parent)
    pattern, legacy = _arrays_pattern(path), legacy_path(path)
    for name in os.listdir(path.parent):
        if pattern.fullmatch(name) and name != prepared.arrays.name:
            shutil.rmtree(path.parent / name, ignore_errors=True)
        elif name.startswith(legacy.name) or name == legacy.stem + ".tmp":
            (path.parent / name).unlink(missing_ok=True)


def load(path: Path, owner: Owner) -> Any:
    """The object saved in ``owner``'s checkpoint ``path``.

    Raises
    ------
    ERError
        One line: the file is not a checkpoint er wrote (or names a class that is not
        er's, or an array of Python objects), is of a newer format, or is another
        collection's.
    """
    move = "move it away to rebuild the collection from its stored mentions."
    try:
        doc = json.loads(path.read_bytes(), parse_constant=_no_constant)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError("no er.checkpoint header")
        version = doc["version"]
        if type(version) is not int or version < 1:
            raise ValueError(f"version {version!r}")
    except Exception as exc:  # malformed: one line, no traceback
        raise ERError(f"{path}: not a checkpoint er can read ({_line(exc)}); {move}") from None
    if version > VERSION:
        raise ERError(
            f"{path}: written in checkpoint format {version} by a newer er (this one reads "
            f"up to {VERSION}); run the newer er, or {move}"
        )
    if doc.get("collection") != vars(owner):
        raise ERError(
            f"{path}: the checkpoint of collection {doc.get('collection')}, not of "
            f"{vars(owner)}; {move}"
        )
    try:
        folder = str(doc["arrays"])
        if not _arrays_pattern(path).fullmatch(folder):  # beside it, not elsewhere
            raise ValueError(f"array folder {folder!r}")
        return decode(doc["state"], partial(_read_array, path.with_name(folder)))
    except Exception as exc:  # malformed, or refused by the decoder: one line
        raise ERError(f"{path}: not a checkpoint er can read ({_line(exc)}); {move}") from None


def _read_array(folder: Path, i: int) -> NDArray[Any]:
    """The i-th array of a checkpoint: a ``.npy`` file read with ``allow_pickle=False``
    (an array of Python objects is a pickle: ValueError)."""
    with (folder / f"{i}.npy").open("rb") as f:
        return np.lib.format.read_array(f, allow_pickle=False)


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity: floats are tagged instead


def _line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"


def legacy_path(path: Path) -> Path:
    """The pickled checkpoint that an older release kept where ``path`` is now
    (``checkpoint.pkl`` for ``checkpoint.json``)."""
    return path.with_suffix(".pkl")


# -- old pickled checkpoints -----------------------------------------------------------------
# What an old pickled checkpoint may name when it is read (:func:`safe_load`): the
# classes defined in er's modules that a checkpoint may name (er._state_io.is_er_module),
# numpy's and scipy's array classes by name, and the few functions their pickles rebuild
# arrays with. Anything else (os.system, builtins.eval, numpy.memmap, a name with a dot
# that would walk to an imported module) stops the load before any module is imported:
# whoever can write the data dir must not run code as the worker.
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
            if is_er_module(module):
                found = super().find_class(module, name)
                # a class er defines there: not a function, not a name it imported
                if isinstance(found, type) and found.__module__ == module:
                    return found
        raise pickle.UnpicklingError(f"a checkpoint may not name {module}.{name}")


def safe_load(f: Any) -> Any:
    """The object pickled in the open binary file ``f``, rebuilt from er's and numpy's
    classes alone (:class:`_SafeUnpickler`); pickle.UnpicklingError for anything else."""
    return _SafeUnpickler(f).load()
