"""``er cluster`` and ``er score``: the clustering cores on arrays, without stores."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from er.cli._common import _progress
from er.exceptions import ERError

logger = logging.getLogger("er")


ALGORITHMS = (
    "scc",
    "mbscc",
    "grinch",
    "rotate",
    "greedy",
    "llama",
    "affinity",
    "recipnn",
    "trellis-map",
    "ghhc",
)
INCREMENTAL = ("mbscc", "grinch", "rotate", "greedy")


# -- er cluster / er score -------------------------------------------------------------
def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _parse_params(items: Sequence[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ERError(f"--param takes NAME=VALUE. Got {item!r} instead.")
        params[name] = _parse_value(value)
    return params


def make_estimator(algorithm: str, params: dict[str, Any]) -> Any:
    """The estimator an `er cluster --algorithm` name stands for."""
    from er import cluster

    classes: dict[str, Callable[..., Any]] = {
        "scc": cluster.SCC,
        "mbscc": cluster.MBSCC,
        "llama": cluster.Llama,
        "affinity": cluster.Affinity,
        "recipnn": cluster.RecipNN,
        "grinch": cluster.Grinch,
        "rotate": cluster.Grinch,
        "greedy": cluster.Grinch,
        "trellis-map": cluster.TrellisMAP,
        "ghhc": lambda **p: cluster.GHHC(on_epoch=_EpochBar("ghhc"), **p),
    }
    if algorithm not in classes:
        raise ERError(f"--algorithm must be one of {', '.join(classes)}. Got {algorithm!r}.")
    if algorithm in ("rotate", "greedy"):
        params = {**params, "mode": algorithm}
    try:
        return classes[algorithm](**params)
    except TypeError as exc:
        raise ERError(f"{algorithm}: {exc}") from None


class _EpochBar:
    """A rich progress bar fed by an estimator's ``on_epoch(epoch, n_epochs, loss)``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._bar: Any = None

    def __call__(self, epoch: int, n_epochs: int, loss: float) -> None:
        from rich.console import Console
        from rich.progress import Progress

        if self._bar is None:
            self._bar = Progress(transient=True, console=Console(stderr=True))
            self._bar.start()
            self._task = self._bar.add_task(f"{self.name}: epochs", total=n_epochs)
        self._bar.update(self._task, completed=epoch, description=f"{self.name}: loss {loss:.4g}")
        if epoch >= n_epochs:
            self._bar.stop()
            self._bar = None


GRAPH_ALGORITHMS = ("scc", "llama", "affinity", "recipnn")  # the ones that take graph=


def _read_array(path: Path, what: str) -> np.ndarray:
    """``np.load`` with one clear line for every way a file can be wrong."""
    if not path.is_file():
        raise ERError(f"{path}: no such file ({what}).")
    try:
        array: np.ndarray = np.load(path, allow_pickle=False)
        return array
    except (ValueError, OSError, EOFError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ERError(f"{path}: not a readable .npy array of {what} ({reason}).") from None


def _load_points(path: Path) -> np.ndarray:
    X = _read_array(path, "points")
    if X.ndim != 2 or not np.issubdtype(X.dtype, np.floating):
        raise ERError(f"{path}: expected a float (n, d) array. Got {X.dtype} {X.shape}.")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ERError(f"{path}: the array {X.shape} has no points to cluster.")
    if not np.all(np.isfinite(X)):
        row = int(np.flatnonzero(~np.isfinite(X).all(axis=1))[0])
        raise ERError(f"{path}: row {row} has a non-finite value.")
    zero = np.flatnonzero(~X.any(axis=1))
    if zero.size:
        raise ERError(
            f"{path}: row {int(zero[0])} is all zeros ({zero.size} such rows); cosine "
            "similarity needs a non-zero vector per point."
        )
    return X


def _check_options(args: argparse.Namespace) -> None:
    """Refuse options the chosen algorithm would silently ignore."""
    if args.neighbors == "annoy" and args.algorithm not in GRAPH_ALGORITHMS:
        raise ERError(
            f"--neighbors annoy applies to {', '.join(GRAPH_ALGORITHMS)}; "
            f"{args.algorithm} searches its own neighbours. Drop --neighbors."
        )
    if args.batch_size is not None and args.algorithm not in INCREMENTAL:
        raise ERError(
            f"--batch-size applies to the incremental algorithms ({', '.join(INCREMENTAL)}); "
            f"{args.algorithm} fits all points at once. Drop --batch-size."
        )
    if not args.output.parent.is_dir():
        raise ERError(f"{args.output}: the folder {args.output.parent} does not exist.")


def cmd_cluster(args: argparse.Namespace) -> int:
    _check_options(args)
    X = _load_points(args.input)
    est = make_estimator(args.algorithm, _parse_params(args.param))
    started = time.perf_counter()
    if args.algorithm in INCREMENTAL:
        _fit_in_batches(est, X, args.batch_size or X.shape[0], args.algorithm)
    elif args.neighbors == "annoy":
        from er.ann import annoy_knn_graph

        with _progress(f"annoy {getattr(est, 'k', 10)}-NN graph of {X.shape[0]} points"):
            graph = annoy_knn_graph(X, getattr(est, "k", 10))
        with _progress(f"{args.algorithm} on {X.shape[0]} points"):
            est.fit(X, graph=graph)
    elif args.neighbors == "auto" and args.algorithm in GRAPH_ALGORITHMS:
        # exact below the index's threshold (the same graph as est.fit(X)), hnswlib above
        from er.ann import index_knn_graph

        with _progress(f"auto {getattr(est, 'k', 10)}-NN graph of {X.shape[0]} points"):
            graph = index_knn_graph(X, getattr(est, "k", 10), backend="auto")
        with _progress(f"{args.algorithm} on {X.shape[0]} points"):
            est.fit(X, graph=graph)
    else:
        with _progress(f"{args.algorithm} on {X.shape[0]} points"):
            est.fit(X)
    hierarchy = est.hierarchy_
    args.output.write_text(json.dumps(hierarchy.to_json()))
    logger.info(
        "%s: %d nodes in %.2f s -> %s",
        args.algorithm,
        hierarchy.n_nodes,
        time.perf_counter() - started,
        args.output,
    )
    return 0


def _fit_in_batches(est: Any, X: np.ndarray, batch: int, name: str) -> None:
    """partial_fit over consecutive row blocks, with a progress bar."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    if batch < 1:
        raise ERError(f"--batch-size must be >= 1. Got {batch}.")
    columns = (BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*Progress.get_default_columns()[:1], *columns, transient=True) as progress:
        task = progress.add_task(f"{name}: points", total=X.shape[0])
        for start in range(0, X.shape[0], batch):
            est.partial_fit(X[start : start + batch])
            progress.update(task, advance=min(batch, X.shape[0] - start))


def cmd_score(args: argparse.Namespace) -> int:
    from er.cluster import Hierarchy
    from er.evaluation import score_hierarchy

    if not args.structure.is_file():
        raise ERError(f"{args.structure}: no such file (structure JSON).")
    try:
        hierarchy = Hierarchy.from_json(json.loads(args.structure.read_text()))
    except (ValueError, KeyError, TypeError) as exc:
        raise ERError(f"{args.structure}: not an `er cluster` structure ({exc}).") from None
    labels = _read_array(args.labels, "labels")
    if labels.ndim != 1 or labels.shape[0] != hierarchy.n_points:
        raise ERError(
            f"{args.labels}: expected one label per point, shape ({hierarchy.n_points},); "
            f"got {labels.shape}."
        )
    sys.stdout.write(json.dumps(score_hierarchy(hierarchy, labels)) + "\n")
    return 0
