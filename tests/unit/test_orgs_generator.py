"""bench/orgs.py, the third free-text tuning set: the phenomena its docstring promises
are in its output, counted from the strings and labels alone."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter, defaultdict
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _orgs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_orgs", BENCH / "orgs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_orgs"] = module
    spec.loader.exec_module(module)
    return module


def test_deterministic_per_seed_and_the_seeds_differ() -> None:
    orgs = _orgs()
    tuning = orgs.org_places(600, seed=orgs.TUNING_SEED)
    assert tuning == orgs.org_places(600, seed=orgs.TUNING_SEED)
    assert tuning != orgs.org_places(600, seed=orgs.TEST_SEED)
    assert [r["rec_id"] for r in tuning] == [f"o{i}" for i in range(600)]
    assert all(set(r) == {"rec_id", "entity", "affiliation"} for r in tuning)


def test_sizes_are_skewed_and_organisations_are_written_many_ways() -> None:
    rows = _orgs().org_places()
    sizes = Counter(r["entity"] for r in rows)
    assert max(sizes.values()) >= 100  # a few organisations hold a hundred strings or more
    assert sum(1 for s in sizes.values() if s <= 3) >= len(sizes) // 5  # many hold few
    texts: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        texts[r["entity"]].add(r["affiliation"])
    big = [e for e, s in sizes.items() if s >= 20]
    assert big and all(len(texts[e]) >= 10 for e in big)  # no organisation has one form


def test_different_organisations_share_their_place_words() -> None:
    """The hard case: a word most strings of one organisation hold (its city, as a rule)
    is also held by most strings of other organisations."""
    rows = _orgs().org_places()
    by_entity: dict[str, list[set[str]]] = defaultdict(list)
    for r in rows:
        by_entity[r["entity"]].append(set(r["affiliation"].lower().replace(",", " ").split()))
    common = {  # the words held by at least half of an organisation's strings
        e: {w for w, c in Counter(w for s in sets for w in s).items() if c >= len(sets) / 2}
        for e, sets in by_entity.items()
        if len(sets) >= 4
    }
    holders = Counter(w for words in common.values() for w in words)
    generic = {"of", "dept.", "department", "university", "univ.", "school", "inc.", "research"}
    shared = {w for w, c in holders.items() if c >= 3 and w not in generic}
    sharing = [e for e, words in common.items() if words & shared]
    assert len(sharing) >= len(common) // 2
