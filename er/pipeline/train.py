"""Training a collection's pair model (issue #29; DESIGN §4 step 2).

The writer trains the first model on the collection's first batch, on the candidate
pairs the index proposed for it, as production will see them; ``er train`` retrains on
every mention so far as an explicit, versioned step. A model is frozen once trained:
every later batch is scored by it until a retraining stores a newer version.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import select
from sqlalchemy.orm import Session

from er.ann._index import exact_search
from er.exceptions import ERError
from er.featurize import Featurizer, FeaturizerConfig
from er.match import FieldTable, PairModel, recounted_u, train_pair_model
from er.match._anchors import PERSONAL_KINDS
from er.pipeline.config import _featurizer, field_types, stored_model
from er.stores.sql import Mention, find_collection, lock_collection

TRAIN_SEED = 0  # of the random pairs behind u; fixed so that a replay trains alike


def candidate_pairs(
    idx: NDArray[np.int64], first: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Distinct unordered pairs (row first + r, idx[r, c]) of a batch's neighbour lists.

    Parameters
    ----------
    idx : ndarray of int64, shape (b, k)
        Global point indices, -1 for none.

    Returns
    -------
    left, right : ndarray of int64, shape (p,)
        left < right, sorted.
    """
    b, k = idx.shape
    a = np.repeat(np.arange(first, first + b), k)
    c = idx.ravel()
    ok = c >= 0
    lo, hi = np.minimum(a[ok], c[ok]), np.maximum(a[ok], c[ok])
    n = int(max(hi.max(initial=0), first + b)) + 1
    key = np.unique(lo * n + hi)
    return key // n, key % n


def train_on_batch(
    table: FieldTable,
    config: Mapping[str, Any],
    idx: NDArray[np.int64],
    first: int,
    version: int = 1,
) -> PairModel:
    """A pair model trained on the table's records and one batch's candidate pairs."""
    kinds = [config["field_types"][name] for name in table.fields]
    pairs = candidate_pairs(idx, first)
    return train_pair_model(table, kinds, pairs, seed=TRAIN_SEED, version=version)


# The writer's first model knows the first batch only, and a first batch of 1,000 drawn
# from a collection of 100,000 holds a dozen duplicate pairs: too few for EM's m. So
# once the collection holds GROWTH_RETRAIN mentions the writer trains the next version
# itself, on all of them, like `er train` (bench/HISTORY.md, 2026-11-25). Only a
# first-batch model is replaced so: a model from `er train` or from gold labels stays
# until the user retrains. A free-text collection's first model (its text in views)
# that EM fitted keeps what EM fitted and has its u counted again (er.match.recounted_u):
# EM on more strings takes near non-matches (organisations of one city) for matches
# (bench/HISTORY.md, 2026-11-27). One whose fit failed (a first batch of originals
# alone, EM's fallback prior) is retrained as any other.
GROWTH_RETRAIN = 10_000


def grown_past_first_model(model: PairModel, population: int) -> bool:
    """Whether the writer replaces its model now (:func:`grown_model`): ``model`` is the
    first batch's (version 1, unsupervised, on fewer than GROWTH_RETRAIN records) and
    the collection holds ``population`` >= GROWTH_RETRAIN mentions."""
    return (
        model.version == 1
        and model.method != "gold"
        and model.n_train < GROWTH_RETRAIN <= population
    )


def grown_model(
    table: FieldTable,
    config: Mapping[str, Any],
    vectors: Callable[[], NDArray[np.float32]],
    held: PairModel,
) -> PairModel:
    """The next version of ``held`` once the collection has grown past it: free text in
    views that EM fitted with its u counted on the records of ``table``
    (:func:`er.match.recounted_u`), any other model trained anew on them
    (:func:`train_on_collection`, on their vectors, shape (len(table), d), which
    ``vectors`` reads only then)."""
    if held.method == "em" and held.compares_views:
        return recounted_u(held, table, seed=TRAIN_SEED, version=held.version + 1)
    return train_on_collection(table, config, vectors(), held.version + 1, held=held)


def train_on_collection(
    table: FieldTable,
    config: Mapping[str, Any],
    X: NDArray[np.float32],
    version: int,
    gold: Sequence[object] | None = None,
    held: PairModel | None = None,
) -> PairModel:
    """A pair model trained on every record of ``table``, candidates by exact k-NN of
    their vectors ``X`` (shape (len(table), d)) and of their personal fields alone
    (:func:`identity_vectors`): the writer's retraining at GROWTH_RETRAIN and
    ``er train`` (which may count from ``gold`` labels) alike.

    The new model compares free text as ``held``, the model it replaces, did: a
    collection made before the views keeps one comparison per text field, which its
    linkage and cut were chosen for."""
    kinds = [config["field_types"][name] for name in table.fields]
    pairs = exact_candidates(X, training_k(config))
    identity = identity_vectors(table, config)
    if identity is not None:
        pairs = _union(pairs, exact_candidates(identity, training_k(config)), len(table))
    views = None if held is None else held.compares_views
    return train_pair_model(
        table, kinds, pairs, gold=gold, seed=TRAIN_SEED, version=version, views=views
    )


def identity_vectors(table: FieldTable, config: Mapping[str, Any]) -> NDArray[np.float32] | None:
    """(n, d) the table's records featurized on their personal fields alone (names,
    dates, ids: er.match._anchors.PERSONAL_KINDS), or None with fewer than two.

    A retraining's candidates are each record's nearest by the whole record and by
    these: by the whole record alone, an inventor's records among 10,000 are nearest
    to those of one city and one employer, and EM learns that matches do not move
    (PatentsView's inventors: a different city -3.3 bits, where the first batch's model
    said -2.1, and pairwise F1 0.850 once the hierarchy is re-scored by it;
    bench/RESULTS.md, "Entity resolution quality on held-out sets (issue #53)").
    Households and twins, which share a home and not a name and a birth date, come
    with the whole record's neighbours as before: the correction for fields
    non-matches agree on together counts them."""
    types = config["field_types"]
    if sum(kind in PERSONAL_KINDS for kind in types.values()) < 2:
        return None
    spec = FeaturizerConfig.from_json(config["featurizer"])
    keep = tuple(f for f in spec.fields if types.get(f.name) in PERSONAL_KINDS)
    if len(keep) < 2:
        return None
    featurize = Featurizer(replace(spec, fields=keep))
    return featurize([table.values(r) for r in range(len(table))])


def _union(
    a: tuple[NDArray[np.int64], NDArray[np.int64]],
    b: tuple[NDArray[np.int64], NDArray[np.int64]],
    n: int,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The distinct pairs of two sets of unordered pairs (left < right) of n rows."""
    key = np.unique(np.r_[a[0] * n + a[1], b[0] * n + b[1]])
    return key // n, key % n


TRAIN_SAMPLE = 20_000  # mentions a retraining reads (the earliest): exact k-NN in blocks
TRAIN_K = 10  # candidates per mention, as the writer's index proposes them


def training_k(config: Mapping[str, Any]) -> int:
    """Candidates per mention a retraining takes: as many as the writer's index
    proposes to this collection (a free-text collection's FREE_TEXT_K, 100, which its
    first model was fitted on). Fitted on 10 instead, EM's model of a free-text
    collection fell apart at the writer's retraining: organisations sharing places,
    10,000 strings, prior 0.0018 and pairwise F1 0.140 at cut 0.4 over every pair of
    a component, against 0.646 with the first model kept (30 cities, a large
    component scored inside the clusters of a first pass; bench/HISTORY.md)."""
    return int(config.get("params", {}).get("k", TRAIN_K))


def retrain(session: Session, *, collection: str, from_gold: bool = False) -> dict[str, Any]:
    """Train a new version of a collection's pair model on its mentions so far and store
    it with the collection (caller's transaction); the next batch's step scores every
    pair the hierarchy's lists hold again by it and redoes the hierarchy
    (er.pipeline.scores.rescored), then scores its own.

    Parameters
    ----------
    from_gold : bool
        Count m and u from the mentions' gold labels instead of estimating them.

    Returns
    -------
    dict
        ``collection``, ``version``, ``method``, ``n_train``, ``prior``.
    """
    coll = find_collection(session, collection)
    if coll is None:
        raise ERError(f"no collection {collection!r}.")
    types = field_types(coll.config)
    if types is None:
        raise ERError(f"collection {collection!r} is scored by cosine; it has no pair model.")
    lock_collection(session, coll.id)
    session.refresh(coll)
    rows = session.execute(
        select(Mention.payload, Mention.gold_entity)
        .where(Mention.collection_id == coll.id)
        .order_by(Mention.id)
        .limit(TRAIN_SAMPLE)
    ).all()
    if len(rows) < 2:
        raise ERError(f"collection {collection!r} has fewer than 2 mentions to train on.")
    gold = [row[1] for row in rows]
    if from_gold and any(g is None for g in gold):
        raise ERError(f"collection {collection!r}: some mentions have no gold label.")
    payloads: list[Mapping[str, Any]] = [row[0] for row in rows]
    batch = types.normalise(payloads)
    table = FieldTable(types.names)
    table.add(batch.rows)
    X = _featurizer(coll.config)([dict(zip(types.names, r, strict=True)) for r in batch.rows])
    held = stored_model(coll.config)
    version = (held.version if held is not None else 0) + 1
    model = train_on_collection(
        table, coll.config, X, version, gold if from_gold else None, held=held
    )
    coll.config = {**coll.config, "pair_model": model.to_json()}
    return {
        "collection": collection,
        "version": model.version,
        "method": model.method,
        "n_train": model.n_train,
        "prior": model.prior,
    }


def exact_candidates(X: NDArray[np.float32], k: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Distinct unordered pairs of each row's k most similar other rows: the writer's
    exact search (:func:`er.ann._index.exact_search`, same ties) of the rows among
    themselves, each row's own entry dropped.

    Parameters
    ----------
    X : ndarray of float32, shape (n, d)
        Unit rows.
    """
    n = X.shape[0]
    k = min(k, n - 1)
    idx, _ = exact_search(X, X, k + 1)
    # a row is among its own k + 1 nearest unless k + 1 duplicates tie with it: move
    # its entry (if any) last, keep the first k
    own = idx == np.arange(n)[:, None]
    idx = np.take_along_axis(idx, np.argsort(own, axis=1, kind="stable"), axis=1)[:, :k]
    return candidate_pairs(idx, 0)
