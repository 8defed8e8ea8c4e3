"""Blocking keys and their candidates against brute-force oracles over Python sets.

Keys: a record's keys are its (type, value) items, every unordered pair of them, and
the words of an organisation name; two records share as many hashed keys as they share
such items (no collisions, pairs order-free, types not fields).

Candidates: a record reads its keys rarest first (fewest holders, ties by key) and
takes their holders, lowest ids first, until ``budget`` holders are read; its
candidates are the other records read, most often first (ties to the lower id), ``m``
at most. Small value alphabets make keys collide; batches of several sizes exercise
the segments' merges; a pickle round trip in the middle rebuilds them.
"""

from __future__ import annotations

import itertools
import pickle
from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from er.ann._keys import (
    TEXT_WORDS,
    WORDS_PER_FIELD,
    KeyIndex,
    n_keys,
    n_text_keys,
    record_keys,
    text_keys,
)

KINDS = ["person_name", "person_name", "date", "org_name"]


def oracle_keys(row: tuple[str | None, ...]) -> set[object]:
    items = {(kind, value) for kind, value in zip(KINDS, row, strict=True) if value}
    pairs = {frozenset(p) for p in itertools.combinations(sorted(items), 2)}
    words = {("word", w) for w in list(dict.fromkeys((row[3] or "").split()))[:WORDS_PER_FIELD]}
    return set(items) | pairs | words


def oracle(keys: np.ndarray, queries: range, budget: int, m: int) -> list[list[int]]:
    """Candidates from the records' key rows (int keys, 0 = none), by the definition."""
    holders: dict[int, list[int]] = {}
    for i, row in enumerate(keys.tolist()):
        for key in row:
            if key:
                holders.setdefault(key, []).append(i)
    out = []
    for q in queries:
        read: Counter[int] = Counter()
        left = budget
        for key in sorted((k for k in keys[q].tolist() if k), key=lambda k: (len(holders[k]), k)):
            for j in holders[key][:left]:
                read[j] += 1
            left = max(left - len(holders[key]), 0)
        read.pop(q, None)
        out.append([j for j, _ in sorted(read.items(), key=lambda t: (-t[1], t[0]))][:m])
    return out


values = st.one_of(st.none(), st.sampled_from(["ann", "bob", "cy", "dee", "ed"]))
orgs = st.lists(st.sampled_from(["acme", "ltd", "co", "ab", "x", "y", "z"]), max_size=9)
records = st.tuples(
    values,
    values,
    st.sampled_from([None, "20001023", "19991231"]),
    orgs.map(lambda ws: " ".join(ws) or None),
)


@given(
    rows=st.lists(records, min_size=1, max_size=150),
    cuts=st.lists(st.integers(1, 40), min_size=1, max_size=8),
    budget=st.integers(1, 40),
    m=st.integers(1, 8),
    reload_at=st.integers(0, 6),
    background=st.integers(0, 400),
    settle=st.lists(st.booleans(), min_size=1, max_size=8),
)
@settings(max_examples=300, deadline=None)
def test_candidates_equal_the_oracle_batch_by_batch(
    rows: list[tuple[str | None, ...]],
    cuts: list[int],
    budget: int,
    m: int,
    reload_at: int,
    background: int,
    settle: list[bool],
) -> None:
    """Merges of ``background`` postings or more run on the merge thread; ``settle``
    says, per batch, whether the running merge is waited for before the lookup (else
    the lookup reads its two segments, or the merged one if it has ended)."""
    index = KeyIndex(n_keys(KINDS), budget=budget, m=m, background=background)
    keys = record_keys(rows, KINDS)
    start, step = 0, 0
    while start < len(rows):
        stop = min(start + cuts[step % len(cuts)], len(rows))
        ids = index.add(record_keys(rows[start:stop], KINDS))
        if step == reload_at:  # a restart: the segments are rebuilt from the keys
            index = pickle.loads(pickle.dumps(index))
        if settle[step % len(settle)]:
            index._catch_up()
            index.settle()
            sizes = [seg.size for seg in index._segments]  # geometric: O(log n) of them
            assert all(a > 2 * b for a, b in itertools.pairwise(sizes)), sizes
        got = index.candidates(ids)
        want = oracle(keys[:stop], range(start, stop), budget, m)
        assert [[int(c) for c in r if c >= 0] for r in got] == want
        start, step = stop, step + 1


@given(a=records, b=records)
@settings(max_examples=300, deadline=None)
def test_records_share_as_many_keys_as_items(
    a: tuple[str | None, ...], b: tuple[str | None, ...]
) -> None:
    ka, kb = record_keys([a, b], KINDS)
    assert len(set(ka[ka != 0])) == int((ka != 0).sum()) == len(oracle_keys(a))
    assert len(set(ka[ka != 0]) & set(kb[kb != 0])) == len(oracle_keys(a) & oracle_keys(b))


def test_swapped_names_share_their_pair_key() -> None:
    a, b = record_keys([("anne", "hill", "20001023", None), ("hill", "anne", None, "acme")], KINDS)
    assert len(set(a[a != 0]) & set(b[b != 0])) == 3  # each name, and the two as a pair


def test_keys_are_stable_across_processes() -> None:
    """The hash is blake2b, not Python's per-process salted ``hash``: a checkpoint's
    keys mean the same after a restart (the value was computed once and written here)."""
    keys = record_keys([("anne", None, None, None)], KINDS)[0]
    assert keys[keys != 0].tolist() == [-778311600056182879]


@given(
    keys=st.lists(
        st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([-(2**63), -1, 1, 2**63 - 1])),
        max_size=300,
    ),
    queries=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=50),
    reuse=st.integers(0, 50),
)
@settings(max_examples=300, deadline=None)
def test_segment_spans_equal_a_binary_search(
    keys: list[int], queries: list[int], reuse: int
) -> None:
    """A segment's directory lookup finds each key's holders where numpy's binary
    search over the sorted postings does, keys of either sign and at the extremes."""
    from er.ann._keys import _Segment

    postings = np.sort(np.asarray(keys, np.int64), kind="stable")
    ids = np.arange(postings.size, dtype=np.int32)
    seg = _Segment.of(postings, ids)
    asked = np.unique(np.asarray(queries + keys[:reuse], np.int64))
    lo, hi = seg.spans(asked)
    want_lo = np.searchsorted(postings, asked, "left")
    want_hi = np.searchsorted(postings, asked, "right")
    found = want_hi > want_lo
    assert np.array_equal(hi - lo, want_hi - want_lo)
    assert np.array_equal(lo[found], want_lo[found])
    k, i = seg.postings()
    assert np.array_equal(k, postings) and np.array_equal(i, ids)
    assert seg.slots.size == 2**seg.bits + 1


@given(
    old=st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 3), max_size=200),
    new=st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 3), max_size=200),
)
@settings(max_examples=300, deadline=None)
def test_merged_segment_equals_one_built_from_all_postings(old: list[int], new: list[int]) -> None:
    """Merging two segments (the newer's ids above the older's) gives the segment
    built from all their postings sorted by key then id: keys, holders, directory."""
    from er.ann._keys import _Segment

    def built(keys: list[int], first_id: int) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(np.asarray(keys, np.int64), kind="stable")
        return np.asarray(keys, np.int64)[order], (order + first_id).astype(np.int32)

    (k1, i1), (k2, i2) = built(old, 0), built(new, len(old))
    merged = _Segment.of(k1, i1).merged(_Segment.of(k2, i2))
    keys, ids = np.concatenate([k1, k2]), np.concatenate([i1, i2])
    order = np.lexsort((ids, keys))
    want = _Segment.of(keys[order], ids[order])
    for name in ("keys", "starts", "ids", "slots"):
        assert np.array_equal(getattr(merged, name), getattr(want, name)), name
    assert merged.bits == want.bits


# more distinct words than TEXT_WORDS, so the cap on words and on pairs is reached
TEXT_ALPHABET = st.sampled_from(
    ["dept", "of", "physics", "univ", "leipzig", "12", "a", "b", "inst", "lab"]
    + [f"w{i}" for i in range(14)]
)


def oracle_text_keys(value: str | None) -> set[object]:
    """Free text's keys as Python sets: the value, its first TEXT_WORDS distinct words and
    first TEXT_WORDS distinct adjacent pairs."""
    if not value:
        return set()
    words = value.split()
    distinct = list(dict.fromkeys(words))[:TEXT_WORDS]
    pairs = list(dict.fromkeys(itertools.pairwise(words)))[:TEXT_WORDS]
    return {("value", value)} | {("word", w) for w in distinct} | {("pair", p) for p in pairs}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(st.none(), st.lists(TEXT_ALPHABET, min_size=1, max_size=40).map(" ".join)),
        min_size=2,
        max_size=12,
    )
)
def test_free_text_records_share_as_many_keys_as_words_and_adjacent_pairs(values) -> None:
    rows = [(v, "19680203") for v in values]  # a date beside the text gives no key
    keys = text_keys(rows, ["text", "date"])
    assert keys.shape == (len(rows), n_text_keys(["text", "date"]))
    for i, j in itertools.combinations(range(len(rows)), 2):
        a, b = set(keys[i][keys[i] != 0].tolist()), set(keys[j][keys[j] != 0].tolist())
        assert len(a) == len(oracle_text_keys(values[i])) == np.count_nonzero(keys[i])
        assert len(a & b) == len(oracle_text_keys(values[i]) & oracle_text_keys(values[j]))
