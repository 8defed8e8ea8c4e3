"""Candidates for free text: exact k-NN against the words of the text (issue #56).

A free-text collection (one string per record) finds each batch's candidates by exact
cosine k-NN up to ``er.pipeline.config.EXACT_MAX`` records, then by the records that
share a word or a pair of adjacent words with it (``er.ann.text_keys``, read rarest
first within ``TEXT_KEY_BUDGET`` holders, the ``TEXT_KEY_CANDIDATES`` most shared
ranked by cosine). This streams a generator's strings through both searches in
batches, as the writer does (normalised and featurized by the collection's inferred
config, the best ``FREE_TEXT_K`` kept), and reports per size:

- the seconds per batch of each search over the batches before the size (exact only
  up to ``--exact-to``: its cost grows with n);
- what the words find of exact search's lists, and of the pairs of one gold entity:
  the share of every such pair among earlier records that each search's lists hold.

    python -m bench text_candidates --people orgs-text people-text --n 200000 \\
        --at 20000 50000 100000 200000 --exact-to 50000 --json bench/raw/text-candidates.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
from people_real import people_records

from er.ann import KeyIndex, batch_neighbors, make_index, text_keys
from er.ann._index import rank
from er.ann._keys import TEXT_KEY_BUDGET, TEXT_KEY_CANDIDATES
from er.pipeline.config import FREE_TEXT_K, _featurizer, field_types, new_collection_config


def _prepared(people: str, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n, d) vectors, (n, w) word keys and (n,) gold codes of a generator's strings."""
    records = people_records(people, n)
    gold = np.unique([r.pop("entity") for r in records], return_inverse=True)[1]
    config = new_collection_config(records[:1000], id_field="rec_id", gold_field=None)
    if config["candidates"] != "words":
        raise SystemExit(f"{people}: not inferred as free text ({config['candidates']})")
    types = field_types(config)
    assert types is not None
    batch = types.normalise(records)
    X = np.asarray(
        _featurizer(config)([dict(zip(types.names, r, strict=True)) for r in batch.rows])
    )
    return X.astype(np.float32), text_keys(batch.rows, types.kinds), gold


def _pairs(idx: np.ndarray, start: int, gold: np.ndarray | None = None) -> set[tuple[int, int]]:
    """The lists' pairs (a later record, an earlier one); with ``gold``, those of one
    entity only."""
    rows = np.repeat(np.arange(start, start + idx.shape[0]), idx.shape[1])
    cols = idx.ravel()
    ok = (cols >= 0) & (cols < rows)  # each pair once, from its later record
    if gold is not None:
        ok &= gold[rows] == gold[np.maximum(cols, 0)]
    return set(zip(rows[ok].tolist(), cols[ok].tolist(), strict=True))


def run(people: str, n: int, at: list[int], exact_to: int, batch: int) -> list[dict[str, Any]]:
    X, keys, gold = _prepared(people, n)
    k = FREE_TEXT_K
    exact = make_index("exact", dim=X.shape[1])
    words = make_index("exact", dim=X.shape[1])  # holds the vectors the words rank
    index = KeyIndex(keys.shape[1], TEXT_KEY_BUDGET, TEXT_KEY_CANDIDATES)
    # every pair of the lists while exact search runs, then the pairs of one entity
    found: dict[str, set[tuple[int, int]]] = {"exact": set(), "words": set()}
    matched: dict[str, set[tuple[int, int]]] = {"exact": set(), "words": set()}
    secs: dict[str, list[float]] = {"exact": [], "words": []}
    rows, mark = [], 0
    for start in range(0, n, batch):
        stop = min(n, start + batch)
        if stop <= exact_to:
            t = time.perf_counter()
            idx, _ = batch_neighbors(exact, X[start:stop], k)
            secs["exact"].append(time.perf_counter() - t)
            found["exact"] |= _pairs(idx, start)
            matched["exact"] |= _pairs(idx, start, gold)
        t = time.perf_counter()
        ids = index.add(keys[start:stop])
        words.add(X[start:stop])
        idx, _ = rank(X[start:stop], words.vectors, index.candidates(ids), k, np.float32)
        secs["words"].append(time.perf_counter() - t)
        if stop <= exact_to:
            found["words"] |= _pairs(idx, start)
        matched["words"] |= _pairs(idx, start, gold)
        if stop in at:
            rows.append(_row(people, stop, found, matched, secs, gold, mark, exact_to, batch))
            mark = len(secs["words"])
    return rows


def _row(
    people: str,
    size: int,
    found: dict[str, set[tuple[int, int]]],
    matched: dict[str, set[tuple[int, int]]],
    secs: dict[str, list[float]],
    gold: np.ndarray,
    mark: int,
    exact_to: int,
    batch: int,
) -> dict[str, Any]:
    """The figures at one size: seconds per batch since the last size, and recall."""
    codes = gold[:size]
    counts = np.bincount(codes).astype(np.int64)
    same = int(np.sum(counts * (counts - 1) // 2))
    out: dict[str, Any] = {"people": people, "n": size, "gold_pairs": same}
    for name, pairs in matched.items():
        if name == "exact" and size > exact_to:
            continue
        out[f"{name}_gold_recall"] = round(len(pairs) / max(same, 1), 4)
        # the batches since the last size; exact's only as far as it ran
        recent = secs[name][mark : size // batch]
        out[f"{name}_s_per_batch"] = round(float(np.mean(recent)), 4) if recent else None
    if size <= exact_to:
        both = found["exact"] & found["words"]
        out["words_of_exact_lists"] = round(len(both) / max(len(found["exact"]), 1), 4)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--people", nargs="+", default=["orgs-text", "people-text"])
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--at", type=int, nargs="+", default=[20_000, 50_000])
    ap.add_argument("--exact-to", type=int, default=50_000)
    ap.add_argument("--batch", type=int, default=1_000)
    ap.add_argument("--json", type=Path, default=None, help="append each row to this file")
    args = ap.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    machine = f"{platform.machine()}, {len(os.sched_getaffinity(0))} cpus"
    for people in args.people:
        for row in run(people, args.n, sorted(args.at), args.exact_to, args.batch):
            row.update(er=commit, machine=machine)
            print(json.dumps(row), flush=True)
            if args.json is not None:
                with args.json.open("a") as f:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
