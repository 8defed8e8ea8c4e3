"""Incremental cosine k-NN index: one interface, three backends (exact, hnswlib, annoy).

Points get dense ids 0..n-1 in the order they are added. Every backend keeps the
unit vectors themselves and re-scores its candidates exactly, so a returned
similarity is always the true cosine (float64 product rounded to float32, as
:func:`er.cluster._graph.similarities`) and rows are ordered by similarity, ties to
the lower id. The backends differ only in which candidates they look at:

* ``exact``: all points, in blocks (O(n d) per query);
* ``hnsw``: hnswlib's graph, inserted single-threaded with a fixed seed;
* ``annoy``: immutable seeded annoy segments plus an exact buffer of the newest
  points (:mod:`er.ann._segments`);
* ``auto``: exact below ``threshold`` points, then hnswlib over all points.

``save(dir)`` writes a complete generation into ``dir/gen-<n>/`` and then swaps the
``dir/CURRENT`` pointer with ``os.replace``: a crash leaves the previous checkpoint
readable, never a half-written one.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from er.cluster._graph import best_per_row, screened_top_k
from er.exceptions import ConfigError

__all__ = ["BACKENDS", "NeighborIndex", "VectorIndex", "load_index", "make_index"]

BACKENDS = ("auto", "exact", "hnsw", "annoy")
# Defaults chosen by `python -m bench ann` on the hard 64-d mixture (bench/RESULTS.md,
# "Incremental k-NN index").
HNSW_DEFAULTS = {"M": 16, "ef_construction": 100, "ef": 300}
ANNOY_DEFAULTS = {"n_trees": 50, "search_k": 10_000, "buffer_size": 10_000}
AUTO_THRESHOLD = 5_000
_FORMAT = 1


@runtime_checkable
class NeighborIndex(Protocol):
    """What the pipeline and the incremental cores need from a k-NN index."""

    dim: int

    def add(self, vectors: NDArray[np.float32]) -> NDArray[np.int64]: ...

    def query(
        self, vectors: NDArray[np.float32], k: int
    ) -> tuple[NDArray[np.int64], NDArray[np.float32]]: ...

    def __len__(self) -> int: ...

    def save(self, directory: str | os.PathLike[str]) -> Path: ...


def check_rows(vectors: Any, dim: int, what: str = "vectors") -> NDArray[np.float32]:
    """(b, dim) float32 unit rows, or ConfigError naming the first bad row."""
    V = np.asarray(vectors)
    if V.ndim != 2 or V.shape[1] != dim or not np.issubdtype(V.dtype, np.number):
        raise ConfigError(f"{what}: expected a numeric (b, {dim}) array. Got {V.dtype} {V.shape}.")
    V = np.ascontiguousarray(V, dtype=np.float32)
    bad = ~np.isfinite(V).all(axis=1)
    if bad.any():
        raise ConfigError(f"{what}: row {int(np.flatnonzero(bad)[0])} has a non-finite value.")
    norms = np.linalg.norm(V.astype(np.float64), axis=1)
    off = np.abs(norms - 1.0) > 1e-3
    if off.any():
        row = int(np.flatnonzero(off)[0])
        raise ConfigError(
            f"{what}: row {row} has norm {norms[row]:.4g}; the index takes unit rows "
            "(er.cluster.normalize_rows)."
        )
    return V


def _check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ConfigError(f"k: expected an integer >= 1. Got {k!r}.")
    return int(k)


def rank(
    Q: NDArray[np.float32],
    X: NDArray[np.float32] | NDArray[np.int8],
    cand: NDArray[np.int64],
    k: int,
    dtype: type[np.floating[Any]] = np.float64,
    scale: NDArray[np.float32] | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    """Exact re-scoring of candidate ids: the best k per row, ties to the lower id.

    Parameters
    ----------
    Q : ndarray of shape (b, d)
    X : ndarray of shape (n, d)
        All indexed vectors.
    cand : ndarray of int64, shape (b, c)
        Distinct candidate ids per row, -1 for none.
    dtype : numpy float type, default float64
        Precision of the products. float32 is a quarter of the work and, in numpy's
        own loops (no BLAS threads), the same on every run, but near-ties may order
        unlike exact search's; the blocking keys' candidates, never compared with
        exact search's lists, are ranked in float32.
    scale : ndarray of float32, shape (n,), optional
        Each row of X is ``X[i] * scale[i]`` (int8 rows, :class:`er.ann.Int8Rows`).

    Returns
    -------
    idx : ndarray of int64, shape (b, k), -1 padded
    sim : ndarray of float32, shape (b, k), -inf padded
    """
    ok = cand >= 0
    sim = np.full(cand.shape, -np.inf, np.float32)
    # rows in blocks of about 2^22 gathered floats: (b, c, d) at once held 800 MB for
    # 1,000 rows of 100 candidates of 1,024 dimensions
    step = max(1, (1 << 22) // max(cand.shape[1] * X.shape[1], 1))
    for s in range(0, cand.shape[0], step):
        block = np.maximum(cand[s : s + step], 0)
        dots = np.einsum(
            "bd,bcd->bc", Q[s : s + step].astype(dtype), X[block].astype(dtype, copy=False)
        )
        sim[s : s + step] = dots if scale is None else dots * scale[block]
    return best_per_row(np.where(ok, cand, -1), sim, k)


def exact_search(
    Q: NDArray[np.float32], X: NDArray[np.float32], k: int, block: int = 256
) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    """Brute-force k-NN of the rows of Q among the rows of X, ordered as :func:`rank`.

    A float32 product screens the candidates and only they are re-scored exactly
    (:func:`er.cluster._graph.screened_top_k`): the answer of a full float64 product,
    ties and near-ties included, for about half its work.
    """
    b, n = Q.shape[0], X.shape[0]
    kk = min(k, n)
    idx = np.full((b, k), -1, np.int64)
    sim = np.full((b, k), -np.inf, np.float32)
    if kk == 0:
        return idx, sim
    for start in range(0, b, block):
        q = Q[start : start + block]
        top, s = screened_top_k(q @ X.T, q, X, kk)
        order = np.lexsort((top, -s), axis=-1)
        idx[start : start + block, :kk] = np.take_along_axis(top, order, axis=1)
        sim[start : start + block, :kk] = np.take_along_axis(s, order, axis=1)
    return idx, sim


class VectorIndex:
    """An incremental cosine k-NN index (build it with :func:`make_index`).

    Parameters
    ----------
    backend : {"exact", "hnsw", "annoy", "auto"}
    dim : int
    seed : int
    params : dict
        Backend parameters (see :data:`HNSW_DEFAULTS`, :data:`ANNOY_DEFAULTS`; auto
        takes ``threshold`` and the hnsw ones).
    """

    def __init__(self, backend: str, dim: int, seed: int, params: dict[str, Any]) -> None:
        self.backend, self.dim, self.seed, self.params = backend, dim, seed, params
        self._X = np.zeros((0, dim), np.float32)
        self._n = 0
        self._ann: Any = None
        if backend in ("hnsw", "annoy"):
            self._ann = _make_ann(backend, dim, seed, params)

    def __len__(self) -> int:
        return self._n

    @property
    def vectors(self) -> NDArray[np.float32]:
        """(n, dim) the indexed unit rows, id order (a view: do not modify)."""
        return self._X[: self._n]

    def add(self, vectors: NDArray[np.float32]) -> NDArray[np.int64]:
        """Index unit rows; return their ids, ``len(self)`` .. ``len(self) + b - 1``."""
        V = check_rows(vectors, self.dim)
        n0, n1 = self._n, self._n + V.shape[0]
        if n1 > self._X.shape[0]:
            grown = np.zeros((max(n1, 2 * self._X.shape[0], 1024), self.dim), np.float32)
            grown[:n0] = self._X[:n0]
            self._X = grown
        self._X[n0:n1] = V
        self._n = n1
        if self._ann is None and self.backend == "auto" and n1 >= self.params["threshold"]:
            # switching from exact to ANN: the points indexed so far go in too, in id order
            self._ann = _make_ann("hnsw", self.dim, self.seed, self.params)
            self._ann.insert(self.vectors, 0)
        elif self._ann is not None:
            self._ann.insert(self.vectors, n0)
        return np.arange(n0, n1, dtype=np.int64)

    def query(
        self, vectors: NDArray[np.float32], k: int
    ) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        """k nearest indexed points of each row (itself included if indexed).

        Returns
        -------
        idx : ndarray of int64, shape (b, k)
            Ids by decreasing similarity, ties to the lower id; -1 past ``len(self)``.
        sim : ndarray of float32, shape (b, k)
            Their cosine similarities; -inf where ``idx`` is -1.
        """
        k = _check_k(k)
        Q = check_rows(vectors, self.dim)
        if self._ann is None:
            return exact_search(Q, self.vectors, k)
        return rank(Q, self.vectors, self._ann.candidates(Q, k, self.vectors), k)

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Checkpoint into ``directory`` (created if missing); return the generation dir."""
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        previous = _current(root)
        number = int(previous.name.split("-")[1]) + 1 if previous else 0
        gen = root / f"gen-{number:06d}"
        shutil.rmtree(gen, ignore_errors=True)  # debris of a crashed save
        gen.mkdir()
        np.save(gen / "vectors.npy", self.vectors)
        state = self._ann.save(gen) if self._ann is not None else None
        meta = {
            "format": _FORMAT,
            "backend": self.backend,
            "dim": self.dim,
            "seed": self.seed,
            "n": self._n,
            "params": self.params,
            "ann": None if self._ann is None else {"kind": self._ann.kind, "state": state},
        }
        _write_atomic(gen / "meta.json", json.dumps(meta))
        _fsync_dir(gen)
        _write_atomic(root / "CURRENT", gen.name)
        for old in root.glob("gen-*"):
            if old != gen:
                shutil.rmtree(old, ignore_errors=True)
        return gen

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> VectorIndex:
        """The index as last saved into ``directory``."""
        gen = _current(Path(directory))
        if gen is None:
            raise ConfigError(f"{directory}: no saved k-NN index (missing CURRENT file).")
        meta = json.loads((gen / "meta.json").read_text())
        if meta.get("format") != _FORMAT:
            raise ConfigError(f"{gen}/meta.json: unknown index format {meta.get('format')!r}.")
        index = cls(meta["backend"], meta["dim"], meta["seed"], meta["params"])
        X = np.load(gen / "vectors.npy")
        index._X, index._n = np.ascontiguousarray(X, np.float32), int(meta["n"])
        if meta["ann"] is not None:
            kind = meta["ann"]["kind"]
            index._ann = _make_ann(kind, index.dim, index.seed, index.params)
            index._ann.load(gen, meta["ann"]["state"], index.vectors)
        return index


def _make_ann(kind: str, dim: int, seed: int, params: dict[str, Any]) -> Any:
    if kind == "hnsw":
        from er.ann._hnsw import HnswGraph

        return HnswGraph(dim, seed, params)
    from er.ann._segments import AnnoySegments

    return AnnoySegments(dim, seed, params)


def _current(root: Path) -> Path | None:
    pointer = root / "CURRENT"
    if not pointer.is_file():
        return None
    return root / pointer.read_text().strip()


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _fsync_dir(path: Path) -> None:
    for f in path.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())


def _params(backend: str, params: dict[str, Any]) -> dict[str, Any]:
    defaults = {
        "exact": {},
        "hnsw": HNSW_DEFAULTS,
        "annoy": ANNOY_DEFAULTS,
        "auto": {**HNSW_DEFAULTS, "threshold": AUTO_THRESHOLD},
    }[backend]
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ConfigError(
            f"index parameter {unknown[0]!r} does not apply to backend {backend!r} "
            f"(known: {', '.join(sorted(defaults)) or 'none'})."
        )
    merged = {**defaults, **params}
    for name, value in merged.items():
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ConfigError(f"index parameter {name}: expected an integer >= 1. Got {value!r}.")
    return {name: int(value) for name, value in merged.items()}


def make_index(backend: str = "auto", *, dim: int, seed: int = 0, **params: Any) -> VectorIndex:
    """A new, empty k-NN index.

    Parameters
    ----------
    backend : {"auto", "exact", "hnsw", "annoy"}, default "auto"
        ``auto``: exact search below ``threshold`` points (default 5,000), then
        hnswlib, the backend that met recall@10 >= 0.95 on the hard mixture.
    dim : int
        Vector dimension.
    seed : int, default 0
        Same seed and same calls give the same answers.
    **params
        hnsw: ``M``, ``ef_construction``, ``ef``; annoy: ``n_trees``, ``search_k``,
        ``buffer_size``; auto: ``threshold`` and the hnsw ones.
    """
    if backend not in BACKENDS:
        raise ConfigError(f"backend: expected one of {', '.join(BACKENDS)}. Got {backend!r}.")
    if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 1:
        raise ConfigError(f"dim: expected an integer >= 1. Got {dim!r}.")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ConfigError(f"seed: expected an integer >= 0. Got {seed!r}.")
    return VectorIndex(backend, int(dim), int(seed), _params(backend, params))


def load_index(directory: str | os.PathLike[str]) -> VectorIndex:
    """The index last saved into ``directory`` (see :meth:`VectorIndex.save`)."""
    return VectorIndex.load(directory)
