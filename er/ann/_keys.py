"""Blocking keys: a record's candidates in time that does not grow with the collection.

An exact k-NN search compares each new record with every record before it, so a
batch costs O(n). Record linkage has long avoided that with *blocking*: only records
that agree exactly on some key are compared. :class:`KeyIndex` does that with many
keys at once and a budget per record:

- a record's keys are its normalised field values, each salted by the field's *type*
  (a given name and a surname are both person names, so a record with the two swapped
  still agrees on them), every pair of them (``surname=grant & dob=19680203``), and
  the words of an organisation's name. A pair of two common values is usually rare,
  so a typo in one field leaves most of the other pairs intact;
- a record reads its keys rarest first and stops after ``budget`` key holders: a
  common key (``state=nsw``) tells little and would make its work grow with the
  collection, while the rare ones name the few records it may be. A mention of an
  entity larger than the budget (a firm with thousands of patents), whose every key
  is common, still reaches the entity's first mentions;
- its candidates are the records it read, the ``m`` read most often (ties to the
  lower id); the caller re-scores them exactly (cosine) and keeps its k best.

The postings live in sorted segments (a log-structured merge: a batch adds a small
segment; neighbours of similar size merge), so adding a batch costs O(b log n). A
segment lists its distinct keys, where each key's holders start, and a directory of the
keys by their leading bits (2-4 keys per slot): a lookup reads one slot and halves its
few keys, whatever the segment's size. (A binary search over the sorted postings, 55M
of them for a million people, took 0.165 s per batch of 1,000 at 1M against 0.071 s at
100k; the directory takes 0.075 s and 0.058 s: bench/RESULTS.md.)

Everything is a function of the records in id order: a replay, or a rebuild from the
keys after a restart, gives the same answers whatever the segments' layout. Only the
(n, n_keys) key matrix is saved (a row log of the writer's checkpoint); the segments
are rebuilt from it.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from er.cluster._graph import _slot_in_row

__all__ = [
    "KEY_BUDGET",
    "KEY_CANDIDATES",
    "TEXT_KEY_BUDGET",
    "TEXT_KEY_CANDIDATES",
    "KeyIndex",
    "n_keys",
    "n_text_keys",
    "record_keys",
    "text_keys",
]

KEY_BUDGET = 128  # key holders read per record, rarest keys first
KEY_CANDIDATES = 100  # candidates per record, by keys shared, re-scored by the caller
SLOT_KEYS = 4  # a segment has a directory slot per 2-4 distinct keys
# A merge of at least this many postings runs on a thread while lookups go on in the
# segments it merges (a batch of 1,000 people adds about 55,000 postings; the largest
# merges at 1M move 50M of them in 5-30 s, which stalled the batch that caught up).
BACKGROUND_POSTINGS = 1 << 21

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """SplitMix64's finaliser: a bijection on 64-bit words that spreads every bit."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
    out: NDArray[np.uint64] = x ^ (x >> np.uint64(31))
    return out


def _value_hash(kind: str, value: str) -> int:
    """A stable 64-bit hash of one typed value (Python's own hash is salted per process)."""
    digest = hashlib.blake2b(f"{kind}\x00{value}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


# Types whose values are several words that vary between mentions of one entity
# ("siemens ag" / "siemens aktiengesellschaft"): each word is a key as well, the first
# WORDS_PER_FIELD distinct ones; common words ("ltd") are read last, if at all.
WORD_KINDS = frozenset({"org_name"})
WORDS_PER_FIELD = 6


def n_keys(kinds: Sequence[str]) -> int:
    """Width of :func:`record_keys`' rows for fields of these types."""
    f = len(kinds)
    return f + f * (f - 1) // 2 + WORDS_PER_FIELD * sum(k in WORD_KINDS for k in kinds)


def record_keys(rows: Sequence[Sequence[str | None]], kinds: Sequence[str]) -> NDArray[np.int64]:
    """The blocking keys of each record: every typed value, every pair of them, and
    the words of multi-word types (:data:`WORD_KINDS`).

    Parameters
    ----------
    rows : sequence of sequence of (str or None), shape (b, n_fields)
        Normalised values in field order; None (or "") is no value.
    kinds : sequence of str, shape (n_fields,)
        Each field's type; values are salted by it, not by the field.

    Returns
    -------
    ndarray of int64, shape (b, n_keys(kinds))
        Each row's distinct keys (never 0), 0 in its other slots; a pair's key does
        not depend on the order of its two values.
    """
    f = len(kinds)
    word_fields = [j for j, kind in enumerate(kinds) if kind in WORD_KINDS]
    single = np.zeros((len(rows), f), np.uint64)
    words = np.zeros((len(rows), WORDS_PER_FIELD * len(word_fields)), np.uint64)
    for r, row in enumerate(rows):
        for j, value in enumerate(row):
            if value:
                single[r, j] = _value_hash(kinds[j], value) or 1
        for w, j in enumerate(word_fields):
            distinct = dict.fromkeys(str(row[j] or "").split())
            for i, word in enumerate(list(distinct)[:WORDS_PER_FIELD]):
                words[r, w * WORDS_PER_FIELD + i] = _value_hash(kinds[j] + "\x01word", word) or 1
    left, right = np.triu_indices(f, 1)
    a, b = single[:, left], single[:, right]
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    pair = _mix(_mix(lo) ^ hi)
    pair[pair == 0] = 1  # 0 means no key
    pair[(a == 0) | (b == 0) | (a == b)] = 0  # a value paired with itself is no pair
    # equal keys within a record (two fields of one type with one value) count once
    return _distinct(np.concatenate([single, pair, words], axis=1))


def _distinct(keys: NDArray[np.uint64]) -> NDArray[np.int64]:
    """(b, w) each row's keys as int64, sorted, a key repeated within a row kept once
    (its copies set to 0, no key)."""
    out = keys.view(np.int64)
    out.sort(axis=1)
    dup = np.zeros(out.shape, bool)
    dup[:, 1:] = out[:, 1:] == out[:, :-1]
    out[dup] = 0
    return out


# Free text (issue #56): a string's words and its pairs of adjacent words are its keys,
# the first TEXT_WORDS distinct of each, beside the whole value. One string holds no
# second field to agree on when a typo breaks the first, but it holds many words, most
# of them common ("department", "of"): a record reads more holders and keeps more
# candidates than a typed one. At 20,000 organisation strings these keys reach as many
# pairs of one organisation as the exact 100 nearest (0.321 of them against 0.311), of
# people as one string 0.987 against 0.990 (bench/RESULTS.md, "Candidates for free
# text").
TEXT_WORDS = 16
TEXT_KEY_BUDGET = 1_000
TEXT_KEY_CANDIDATES = 300
TEXT_KINDS = frozenset({"text"})
_TEXT_WIDTH = 1 + 2 * TEXT_WORDS  # keys per text field: the value, words, word pairs


def n_text_keys(kinds: Sequence[str]) -> int:
    """Width of :func:`text_keys`' rows for fields of these types."""
    return _TEXT_WIDTH * sum(k in TEXT_KINDS for k in kinds)


def text_keys(rows: Sequence[Sequence[str | None]], kinds: Sequence[str]) -> NDArray[np.int64]:
    """The blocking keys of free text: per ``text`` field its whole value, its first
    ``TEXT_WORDS`` distinct words and first ``TEXT_WORDS`` distinct pairs of adjacent
    words; other fields give none.

    Parameters
    ----------
    rows : sequence of sequence of (str or None), shape (b, n_fields)
        Normalised values in field order.
    kinds : sequence of str, shape (n_fields,)

    Returns
    -------
    ndarray of int64, shape (b, n_text_keys(kinds))
        Each row's distinct keys (never 0), sorted, 0 in its other slots.
    """
    fields = [j for j, kind in enumerate(kinds) if kind in TEXT_KINDS]
    out = np.zeros((len(rows), n_text_keys(kinds)), np.uint64)
    for r, row in enumerate(rows):
        for f, j in enumerate(fields):
            value = str(row[j] or "")
            if not value:
                continue
            base = f * _TEXT_WIDTH
            out[r, base] = _value_hash(kinds[j], value) or 1
            words = value.split()
            for i, word in enumerate(list(dict.fromkeys(words))[:TEXT_WORDS]):
                out[r, base + 1 + i] = _value_hash(kinds[j] + "\x01word", word) or 1
            pairs = dict.fromkeys(f"{a} {b}" for a, b in itertools.pairwise(words))
            for i, pair in enumerate(list(pairs)[:TEXT_WORDS]):
                out[r, base + 1 + TEXT_WORDS + i] = _value_hash(kinds[j] + "\x02pair", pair) or 1
    return _distinct(out)


class KeyIndex:
    """Records by blocking key; each record's candidates among all records indexed.

    Parameters
    ----------
    n_keys : int
        Keys per record (the width of :func:`record_keys`' or :func:`text_keys`' rows).
    budget : int, default KEY_BUDGET
        Key holders read per record (its own entries included).
    m : int, default KEY_CANDIDATES
        Candidates per record.
    """

    # a merge running on the merge thread (class defaults: older pickles lack them)
    _pending: _Merge | None = None
    background = BACKGROUND_POSTINGS

    def __init__(
        self,
        n_keys: int,
        budget: int = KEY_BUDGET,
        m: int = KEY_CANDIDATES,
        background: int = BACKGROUND_POSTINGS,
    ) -> None:
        self.budget, self.m, self.background = budget, m, background
        self._keys = np.zeros((0, n_keys), np.int64)  # a row log of the checkpoint
        self._n = 0
        self._reset_postings()

    def _reset_postings(self) -> None:
        # segments over consecutive id ranges, oldest (and larger) first; rows
        # [0, _indexed) are in them
        self._segments: list[_Segment] = []
        self._indexed = 0
        self._pending = None

    def __len__(self) -> int:
        return self._n

    @property
    def nbytes(self) -> int:
        """Bytes held: the key matrix (with its spare rows) and the segments."""
        return self._keys.nbytes + sum(seg.nbytes for seg in self._segments)

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the keys alone: the segments are rebuilt from them (same answers)."""
        state = self.__dict__.copy()
        state["_segments"], state["_indexed"], state["_pending"] = [], 0, None
        return state

    def add(self, keys: NDArray[np.int64]) -> NDArray[np.int64]:
        """Index records by their keys (rows of :func:`record_keys` or :func:`text_keys`);
        return their ids."""
        n0, n1 = self._n, self._n + keys.shape[0]
        if n1 > self._keys.shape[0]:
            grown = np.zeros((max(n1, 2 * self._keys.shape[0], 1024), keys.shape[1]), np.int64)
            grown[:n0] = self._keys[:n0]
            self._keys = grown
        self._keys[n0:n1] = keys
        self._n = n1
        return np.arange(n0, n1, dtype=np.int64)

    def candidates(self, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        """Each indexed record's candidates among all indexed records (itself excluded).

        A record's keys are read rarest first (fewest holders; ties by key) and their
        holders taken until ``budget`` holders are read, the last key's lowest ids
        first. A record's work is thus bounded whatever the collection's size, its
        rare keys (the few records it may be) come first, and a mention of an entity
        larger than the budget, whose every key is common, still reaches some of it.

        Parameters
        ----------
        ids : ndarray of int64, shape (b,)

        Returns
        -------
        ndarray of int64, shape (b, c), c <= m
            Candidate ids, most shared keys first (ties to the lower id), -1 padded.
        """
        self._catch_up()
        keys = self._keys[ids]
        row, col = np.nonzero(keys)
        key = keys[row, col]
        spans = self._spans(key)
        df = np.sum([hi - lo for lo, hi in spans], axis=0)
        order = np.lexsort((key, df, row))
        cum = np.cumsum(df[order])
        first = np.searchsorted(row[order], row[order])  # each row's first lookup
        read_before = cum - df[order] - np.r_[0, cum][first]
        take = np.empty_like(df)
        take[order] = np.clip(self.budget - read_before, 0, df[order])
        owner, cand = self._gather(spans, take)
        return self._best(ids, row[owner], cand)

    def _gather(
        self, spans: list[tuple[NDArray[np.int64], NDArray[np.int64]]], take: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """The first ``take[i]`` holders (lowest ids) of each looked-up key i.

        Segments hold consecutive id ranges, oldest first, each key's ids ascending:
        their spans in order list a key's holders by id.

        Returns
        -------
        owner : ndarray of int64, shape (take.sum(),)
            The looked-up key of each holder.
        ids : ndarray of int64, shape (take.sum(),)
        """
        owners, found = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        room = take.copy()
        for (lo, hi), seg in zip(spans, self._segments, strict=True):
            here = np.minimum(hi - lo, room)
            room -= here
            owner, pos = _expand(lo, lo + here)
            owners.append(owner)
            found.append(seg.ids[pos].astype(np.int64))
        return np.concatenate(owners), np.concatenate(found)

    def _best(
        self, ids: NDArray[np.int64], row: NDArray[np.int64], cand: NDArray[np.int64]
    ) -> NDArray[np.int64]:
        """(b, c) per query row the ``m`` candidates sharing the most keys with it."""
        other = cand != ids[row]
        row, cand = row[other], cand[other]
        pair, shared = np.unique(row * np.int64(self._n) + cand, return_counts=True)
        row, cand = pair // self._n, pair % self._n
        order = np.lexsort((cand, -shared, row))
        row, cand = row[order], cand[order]
        rank = _slot_in_row(np.bincount(row, minlength=ids.size))
        keep = rank < self.m
        width = int(rank[keep].max()) + 1 if keep.any() else 0
        out = np.full((ids.size, width), -1, np.int64)
        out[row[keep], rank[keep]] = cand[keep]
        return out

    def _spans(self, key: NDArray[np.int64]) -> list[tuple[NDArray[np.int64], NDArray[np.int64]]]:
        """Where the holders of each of ``key`` (any order) lie in each segment's ids:
        ``[lo, hi)``, empty for a key the segment lacks. Each distinct key is looked
        up once, in ascending order."""
        distinct, back = np.unique(key, return_inverse=True)
        spans = []
        for seg in self._segments:
            lo, hi = seg.spans(distinct)
            spans.append((lo[back], hi[back]))
        return spans

    def _catch_up(self) -> None:
        """Put rows ``_indexed .. _n`` into a new segment; merge neighbours of like size.

        A segment merges into the one before it while that one is at most twice its
        size, so sizes shrink geometrically: O(log n) segments, and each posting is
        re-sorted O(log n) times over the collection's life (two sorted runs merge in
        one timsort pass). A merge of ``background`` postings or more runs on the
        merge thread, one at a time, and takes the place of its two segments at the
        first catch-up after it ends; until then lookups read the two. Answers do not
        depend on the segments' layout, so neither does a replay.
        """
        self._take_merged()
        if self._indexed == self._n:
            return
        new = self._keys[self._indexed : self._n]
        row, col = np.nonzero(new)
        seg_keys = new[row, col]
        order = np.argsort(seg_keys, kind="stable")
        ids = (row + self._indexed).astype(np.int32)
        self._segments.append(_Segment.of(seg_keys[order], ids[order]))
        self._indexed = self._n
        self._merge_neighbours()

    def _merge_neighbours(self) -> None:
        """Merge the newest pair of neighbours of like size (the older at most twice
        the newer), again, until none is left that is not being merged already."""
        while (i := self._like_pair()) is not None:
            older, newer = self._segments[i], self._segments[i + 1]
            if older.size + newer.size >= self.background:
                if self._pending is None:  # one at a time; the next waits its turn
                    self._pending = _Merge(older, newer, _merger().submit(older.merged, newer))
                return
            self._segments[i : i + 2] = [older.merged(newer)]

    def _like_pair(self) -> int | None:
        """The last i whose segments i and i + 1 should merge, neither in a running
        merge; None if there is none."""
        segments, busy = self._segments, self._pending
        for i in range(len(segments) - 2, -1, -1):
            older, newer = segments[i], segments[i + 1]
            if busy is not None:
                if newer is busy.older:
                    return None  # older pairs wait for the running merge
                if busy.newer is older or busy.newer is newer:
                    continue
            if older.size <= 2 * newer.size:
                return i
        return None

    def _take_merged(self, wait: bool = False) -> None:
        """Put a finished background merge in place of its two segments (``wait``:
        first wait for it to finish)."""
        merge = self._pending
        if merge is None or not (wait or merge.future.done()):
            return
        merged = merge.future.result()
        i = next(k for k, seg in enumerate(self._segments) if seg is merge.older)
        assert self._segments[i + 1] is merge.newer
        self._segments[i : i + 2] = [merged]
        self._pending = None
        self._merge_neighbours()

    def settle(self) -> None:
        """Wait for the running merge, if any, and make the merges due (tests, benches)."""
        while self._pending is not None:
            self._take_merged(wait=True)


@dataclass(frozen=True)
class _Merge:
    """A merge of two neighbouring segments running on the merge thread."""

    older: _Segment
    newer: _Segment
    future: Future[_Segment]


_MERGER: ThreadPoolExecutor | None = None
_MERGER_LOCK = threading.Lock()


def _merger() -> ThreadPoolExecutor:
    """The process's one merge thread (numpy's sort releases the GIL while it runs)."""
    global _MERGER
    with _MERGER_LOCK:
        if _MERGER is None:
            _MERGER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="er-key-merge")
        return _MERGER


@dataclass(frozen=True)
class _Segment:
    """The postings of a range of ids: each distinct key's holders, ids ascending.

    Attributes
    ----------
    keys : ndarray of int64, shape (u,)
        The distinct keys, ascending.
    starts : ndarray of int32 or int64, shape (u + 1,)
        ``keys[i]``'s holders are ``ids[starts[i]:starts[i + 1]]``.
    ids : ndarray of int32, shape (p,)
    bits : int
        Width of the directory: ``2**bits`` slots, about ``u / SLOT_KEYS``.
    slots : ndarray of int32 or int64, shape (2**bits + 1,)
        The keys whose leading ``bits`` bits (in int64 order) are s are
        ``keys[slots[s]:slots[s + 1]]``.
    """

    keys: NDArray[np.int64]
    starts: NDArray[np.signedinteger[Any]]
    ids: NDArray[np.int32]
    bits: int
    slots: NDArray[np.signedinteger[Any]]

    @classmethod
    def of(cls, keys: NDArray[np.int64], ids: NDArray[np.int32]) -> _Segment:
        """The segment of postings sorted by key (ties by id): ``keys``, ``ids`` (p,)."""
        first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if keys.size else keys
        distinct = np.ascontiguousarray(keys[first])
        starts = np.r_[first, keys.size]
        bits = int(np.ceil(np.log2(max(distinct.size / SLOT_KEYS, 1.0))))
        # hashed keys spread evenly over the slots: 2-4 per slot on average
        per_slot = np.bincount(_slot(distinct, bits), minlength=2**bits)
        slots = _offsets(np.r_[0, np.cumsum(per_slot)])
        return cls(distinct, _offsets(starts), ids, bits, slots)

    def merged(self, newer: _Segment) -> _Segment:
        """This segment and a ``newer`` one (its ids all above this one's) as one.

        The postings of both, as two runs sorted by key, in one stable sort: a
        key's holders stay older first, ids ascending, and timsort merges two runs
        in one pass. (Merging the distinct keys alone and moving each posting to its
        place was no faster: people records have half as many distinct keys as
        postings.)
        """
        (k1, i1), (k2, i2) = self.postings(), newer.postings()
        keys, ids = np.concatenate([k1, k2]), np.concatenate([i1, i2])
        order = np.argsort(keys, kind="stable")
        return _Segment.of(keys[order], ids[order])

    @property
    def size(self) -> int:
        """Postings held."""
        return int(self.ids.size)

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.starts.nbytes + self.ids.nbytes + self.slots.nbytes

    def postings(self) -> tuple[NDArray[np.int64], NDArray[np.int32]]:
        """``(key, id)`` of every posting, sorted by key then id: shape (p,) each."""
        return np.repeat(self.keys, np.diff(self.starts)), self.ids

    def spans(self, query: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``[lo, hi)`` in ``ids`` of the holders of each of ``query`` (distinct keys,
        ascending; shape (q,)), ``lo == hi == 0`` for a key this segment lacks.

        Each key reads its directory slot, then halves the slot's few keys until one
        is left: the search steps follow the keys per slot, not the segment's size.
        """
        query = np.ascontiguousarray(query, np.int64)
        slot = _slot(query, self.bits)
        lo = self.slots[slot].astype(np.int64)
        hi = self.slots[slot + 1].astype(np.int64)
        # leftmost position in [lo, hi) whose key is >= the query (hi if none)
        open_ = np.flatnonzero(lo < hi)
        while open_.size:
            mid = (lo[open_] + hi[open_]) // 2
            below = self.keys[mid] < query[open_]
            lo[open_] = np.where(below, mid + 1, lo[open_])
            hi[open_] = np.where(below, hi[open_], mid)
            open_ = open_[lo[open_] < hi[open_]]
        hit = lo < self.keys.size
        hit[hit] = self.keys[lo[hit]] == query[hit]
        at = lo[hit]
        start, stop = np.zeros(query.size, np.int64), np.zeros(query.size, np.int64)
        start[hit], stop[hit] = self.starts[at], self.starts[at + 1]
        return start, stop


def _slot(keys: NDArray[np.int64], bits: int) -> NDArray[np.int64]:
    """(q,) the leading ``bits`` bits of each key, in the int64 order of the keys (the
    sign bit flipped, so that slots ascend with the keys)."""
    if bits == 0:
        return np.zeros(keys.shape, np.int64)
    flipped = np.ascontiguousarray(keys, np.int64).view(np.uint64) ^ np.uint64(1 << 63)
    return (flipped >> np.uint64(64 - bits)).astype(np.int64)


def _offsets(x: NDArray[np.integer[Any]]) -> NDArray[np.signedinteger[Any]]:
    """Offsets in int32 while they fit (half the memory), else int64."""
    return x.astype(np.int32 if x.size == 0 or x[-1] < 2**31 else np.int64)


def _expand(
    lo: NDArray[np.int64], hi: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Every position of the ranges ``[lo_i, hi_i)`` with the range it came from
    (:func:`er.cluster._graph.row_entries` for ranges that are not CSR rows).

    Returns
    -------
    owner, pos : ndarray of int64, shape (sum(hi - lo),)
    """
    length = hi - lo
    return np.repeat(np.arange(lo.size), length), np.repeat(lo, length) + _slot_in_row(length)
