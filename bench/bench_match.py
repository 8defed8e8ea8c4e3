"""Scoring cost of the pair model: candidate pairs per second on one core (issue #29).

The realistic people (``people_real.py``) are normalised by their inferred field types,
their candidate pairs are the exact 10 nearest neighbours of the featurized normalised
values (what the writer's index proposes), the model is trained on them (EM), and then
every candidate pair is scored again and timed: comparison levels, term-frequency
weights, the probability. Peer in the same run: the same levels computed pair by pair
in a Python loop over rapidfuzz's single-pair calls (how a per-pair scorer would do it).

    python -m bench match --n 10000 --level hard
    python -m bench match --set leipzig --k 100   # free text alone: its views
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from people_real import TEST_SEED, real_people

from er.featurize import FeaturizerConfig, FieldSpec, FieldTypes, featurize
from er.match import FieldTable, train_pair_model


def candidates(X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct unordered pairs of each row's k nearest rows (exact, blocked product)."""
    left, right = [], []
    for start in range(0, X.shape[0], 2000):
        S = X[start : start + 2000] @ X.T
        S[np.arange(S.shape[0]), start + np.arange(S.shape[0])] = -np.inf
        top = np.argpartition(-S, k, axis=1)[:, :k]
        left.append(np.repeat(np.arange(start, start + S.shape[0]), k))
        right.append(top.ravel())
    a, b = np.concatenate(left), np.concatenate(right)
    n = X.shape[0]
    key = np.unique(np.minimum(a, b) * n + np.maximum(a, b))
    return key // n, key % n


def per_pair_levels(model, table, left, right) -> int:  # type: ignore[no-untyped-def]
    """The peer: the same ladders, one pair and one field at a time."""
    from er.match import LADDERS, compare_field

    count = 0
    codes = table.codes
    columns = model.columns(table)
    for a, b in zip(left.tolist(), right.tolist(), strict=True):
        for fw, c in zip(model.fields, columns, strict=True):
            compare_field(
                fw.kind,
                table.vocab[c],
                codes[[a], c].astype(np.int64),
                codes[[b], c].astype(np.int64),
                fw.df,
                fw.df_floor,
            )
            count += LADDERS[fw.kind].n_levels > 0
    return count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--level", default="hard", choices=("medium", "hard"))
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--peer-pairs", type=int, default=5_000, help="pairs the slow peer scores")
    ap.add_argument("--set", help="a labelled set of bench quality instead (e.g. leipzig)")
    args = ap.parse_args()
    if args.set:
        from datasets import load

        records = load(args.set)[0]
        args.n, args.level = len(records), args.set
    else:
        records = real_people(args.n, level=args.level, seed=TEST_SEED)
    fields = [f for f in records[0] if f not in ("rec_id", "entity")]
    types = FieldTypes.infer(records[:1000], fields)
    batch = types.normalise(records)
    table = FieldTable(types.names)
    table.add(batch.rows)
    cfg = FeaturizerConfig(fields=tuple(FieldSpec(name=f) for f in fields))
    X = featurize([dict(zip(types.names, r, strict=True)) for r in batch.rows], cfg)
    left, right = candidates(X, args.k)
    model = train_pair_model(table, list(types.kinds), (left, right))
    model.probability(table, left[:1000], right[:1000])  # warm the name caches alike
    started = time.process_time()
    p = model.probability(table, left, right)
    seconds = time.process_time() - started
    few = slice(0, args.peer_pairs)
    started = time.process_time()
    per_pair_levels(model, table, left[few], right[few])
    peer = time.process_time() - started
    print(f"types: {types.to_json()}")
    print(
        f"{left.size:,} candidate pairs of {args.n:,} {args.level} records, "
        f"{(p >= 0.5).sum():,} at p >= 0.5"
    )
    print(f"er pair model: {seconds:.3f} CPU s = {left.size / seconds:,.0f} pairs/s (one core)")
    print(
        f"peer, per-pair loop (levels only, {args.peer_pairs:,} pairs): "
        f"{args.peer_pairs / peer:,.0f} pairs/s"
    )


if __name__ == "__main__":
    main()
