"""Stable entity ids: property tests of the overlap matching over random histories.

The oracle is the partitions themselves: memberships are replayed from the steps'
joined/left intervals and compared with the partition current at every batch.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from er.entities import ArrayLedger, EntityLedger
from er.exceptions import ConfigError


@st.composite
def histories(draw: st.DrawFn) -> list[list[set[int]]]:
    """Partitions of a growing mention set, batch after batch.

    Labels come from a small range so that merges, splits, mixtures and exact
    repeats of an earlier partition (ids that must come back unchanged) all occur.
    """
    n_batches = draw(st.integers(1, 8))
    n = 0
    out: list[list[set[int]]] = []
    labels: list[int] = []
    for _ in range(n_batches):
        n += draw(st.integers(0 if n else 1, 6))
        if out and draw(st.booleans()):  # keep most labels: small changes
            keep = draw(st.lists(st.booleans(), min_size=n, max_size=n))
            fresh = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
            labels = [labels[i] if i < len(labels) and keep[i] else fresh[i] for i in range(n)]
        else:
            labels = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
        groups: dict[int, set[int]] = defaultdict(set)
        for m, label in enumerate(labels):
            groups[label].add(m)
        out.append(list(groups.values()))
    return out


def _replay(intervals: list[tuple[int, int, int, int | None]], batch: int) -> dict[int, int]:
    """mention -> entity as of ``batch``, from (mention, entity, since, until) rows."""
    out: dict[int, int] = {}
    for m, e, since, until in intervals:
        if since <= batch and (until is None or until > batch):
            assert m not in out, f"mention {m} in two entities as of {batch}"
            out[m] = e
    return out


@pytest.mark.parametrize("make", [EntityLedger, ArrayLedger])
@settings(max_examples=300, deadline=None)
@given(history=histories())
def test_matching_invariants(make, history: list[list[set[int]]]) -> None:
    ledger = make()
    used: set[int] = set()
    retired: set[int] = set()
    intervals: list[tuple[int, int, int, int | None]] = []
    open_at: dict[tuple[int, int], int] = {}
    snapshots: dict[int, dict[int, int]] = {}
    for batch, partition in enumerate(history, start=1):
        before = {e: set(ms) for e, ms in ledger.members.items()}
        old_of = dict(ledger.entity_of)
        step = ledger.step(batch, partition)

        # ids are never reused: minted ids are new, retired ids never return.
        assert not set(step.minted) & used
        used |= set(step.minted)
        assert not set(ledger.members) & retired
        retired |= set(step.retired)
        # every mention has exactly one current entity, and the entities are the partition
        assert sorted(map(sorted, ledger.members.values())) == sorted(map(sorted, partition))
        assert set(ledger.entity_of) == set().union(*partition)

        for e, old in before.items():
            for c in partition:
                if c & set(old_of) == old:  # unchanged among earlier mentions: same id
                    assert ledger.entity_of[next(iter(old))] == e
        _check_pure_merges_and_splits(before, old_of, partition, ledger.entity_of)

        # every change of entity is explained by an event, and every event by a change
        moved = {(old_of[m], e) for m, e in ledger.entity_of.items() if old_of.get(m, e) != e}
        assert moved == {(a, b) for a, b, _ in step.events}
        for a, _, kind in step.events:
            successors = {ledger.entity_of[m] for m in before[a]}
            assert kind == ("split" if len(successors) > 1 else "merge")

        for m, e in step.left:
            intervals.append((m, e, open_at.pop((m, e)), batch))
        for m, e in step.joined:
            open_at[m, e] = batch
        snapshots[batch] = dict(ledger.entity_of)

    # replaying the intervals from the first batch reproduces every as-of answer
    rows = intervals + [(m, e, since, None) for (m, e), since in open_at.items()]
    for batch, expected in snapshots.items():
        assert _replay(rows, batch) == expected


def _check_pure_merges_and_splits(
    before: dict[int, set[int]],
    old_of: dict[int, int],
    partition: list[set[int]],
    entity_of: dict[int, int],
) -> None:
    for c in partition:
        preds = {old_of[m] for m in c if m in old_of}
        if len(preds) > 1 and all(before[p] <= c for p in preds):  # a pure merge
            largest = min(preds, key=lambda p: (-len(before[p]), min(before[p])))  # oldest mention
            assert entity_of[next(iter(c))] == largest
    for e, old in before.items():
        parts = [c & old for c in partition if c & old]
        pure = all({old_of[m] for m in c if m in old_of} == {e} for c in partition if c & old)
        if len(parts) > 1 and pure:  # a pure split: the largest part keeps the id
            keeper = [p for p in parts if entity_of[next(iter(p))] == e]
            assert len(keeper) == 1 and len(keeper[0]) == max(map(len, parts))


def test_hand_built_merge_then_split() -> None:
    ledger = EntityLedger()
    first = ledger.step(1, [{"a", "b"}, {"c"}, {"d", "e", "f"}])
    assert first.minted == [1, 2, 3] and first.events == []
    ab, c, def_ = (ledger.entity_of[m] for m in "acd")
    merged = ledger.step(2, [{"a", "b", "c"}, {"d", "e", "f"}, {"g"}])
    assert ledger.entity_of["c"] == ab  # the larger predecessor keeps its id
    assert merged.events == [(c, ab, "merge")] and merged.retired == [c]
    assert merged.minted == [4]  # g is new; c's id 2 is never reused
    split = ledger.step(3, [{"a", "b", "c"}, {"d"}, {"e", "f", "g"}])
    # d,e,f splits: e,f (2 members) keep it, d gets a new id; g's entity merges into it
    assert ledger.entity_of["e"] == def_ and ledger.entity_of["d"] == 5
    assert sorted(split.events) == [(def_, 5, "split"), (4, def_, "merge")]
    assert ("d", def_) in split.left and ("g", 4) in split.left


@pytest.mark.parametrize("make", [EntityLedger, ArrayLedger])
def test_bad_partitions_are_refused(make) -> None:
    ledger = make()
    ledger.step(1, [{1, 2}])
    with pytest.raises(ConfigError, match="drops mention"):
        ledger.step(2, [{1}])
    with pytest.raises(ConfigError, match="two new entities"):
        ledger.step(2, [{1, 2}, {2}])
    with pytest.raises(ConfigError, match="batches must increase"):
        ledger.step(1, [{1, 2}])


@settings(max_examples=300, deadline=None)
@given(history=histories(), seed=st.integers(0, 2**16))
def test_the_array_ledger_steps_exactly_as_the_dict_ledger(history, seed) -> None:
    """Oracle: the dict ledger. Same ids, events, mints and retirements at every batch;
    the same memberships opened and closed (the array ledger orders them by entity).
    Mentions are shuffled and relabelled per batch: only the label order is an input."""
    rng = np.random.default_rng(seed)
    ref, fast = EntityLedger(), ArrayLedger()
    for batch, partition in enumerate(history, start=1):
        want = ref.step(batch, partition)
        mentions = np.array([m for c in partition for m in c], np.int64)
        labels = np.repeat(np.arange(len(partition)) * 7 - 3, [len(c) for c in partition])
        shuffle = rng.permutation(mentions.size)
        got = fast.step_labels(batch, mentions[shuffle], labels[shuffle])
        assert (got.events, got.minted, got.retired) == (want.events, want.minted, want.retired)
        assert sorted(got.joined) == sorted(want.joined)
        assert sorted(got.left) == sorted(want.left)
        assert fast.entity_of == ref.entity_of and fast.next_id == ref.next_id


def test_an_array_ledger_continues_a_dict_ledger() -> None:
    again = ArrayLedger.from_ledger(EntityLedger({5: [1, 2], 9: [3]}, next_id=10, last_batch=4))
    step = again.step(5, [{1, 2, 3, 4}])
    assert again.entity_of == {1: 5, 2: 5, 3: 5, 4: 5} and step.events == [(9, 5, "merge")]


def _closed_part(old_of: dict[int, int], partition: list[set[int]]) -> set[int]:
    """The mentions whose entity may change: new ones and those whose group is not an
    old entity as it was, closed over old entities and new groups (what MBSCC's floor
    components give the writer)."""
    before: dict[int, set[int]] = defaultdict(set)
    for m, e in old_of.items():
        before[e].add(m)
    group_of = {m: frozenset(c) for c in partition for m in c}
    part = {m for m in group_of if m not in old_of or group_of[m] != before[old_of[m]]}
    while True:
        grown = set(part)
        for m in part:
            grown |= group_of[m] | before.get(old_of.get(m, -1), set())
        if grown == part:
            return part
        part = grown


@settings(max_examples=300, deadline=None)
@given(history=histories())
def test_a_step_over_a_closed_part_equals_the_whole_step(history: list[list[set[int]]]) -> None:
    whole, local = ArrayLedger(), ArrayLedger()
    for batch, partition in enumerate(history, start=1):
        part = _closed_part(whole.entity_of, partition)
        label = {m: min(c) for c in partition for m in c}  # the same order in both
        everyone = np.array(sorted(label), np.int64)
        mine = np.array(sorted(part), np.int64)
        a = whole.step_labels(batch, everyone, np.array([label[m] for m in everyone.tolist()]))
        b = local.step_part(batch, mine, np.array([label[m] for m in mine.tolist()]))
        assert (a.joined, a.left, a.events) == (b.joined, b.left, b.events)
        assert (a.minted, a.retired) == (b.minted, b.retired)
        np.testing.assert_array_equal(whole.mention_, local.mention_)
        np.testing.assert_array_equal(whole.entity_, local.entity_)
