"""Affiliation strings of organisations that share their places: a tuning set of free
text that must tell entities apart (the third, beside ``patstat-names`` and
``febrl3-text``).

An affiliation as authors and clerks write it: an optional department, the
organisation's name in one of its forms, and some of its address, in one string. What
makes it hard, by construction:

- **organisations share places.** Each of 30 cities holds 4-13 organisations of six
  kinds: the city's university (``University of Halden``), a second one named after the
  city (``Halden Institute of Technology``, ``Halden State University``), firms and
  firms' research labs (``Varnex Inc.``, ``Quorbit Research``), hospitals and
  institutes. Organisations of one city share its name, region, postcode, street names
  and country; the two universities of a city share the city's name in their own
  names too;
- **names recur across places.** A firm may have a lab in two cities (two entities
  whose names agree and whose places differ); research institutes of one society share
  their name (``Brenner Institute for Physics``, ``Brenner Institute for Chemistry``);
- **departments recur everywhere.** ``Dept. of Computer Science`` is written in front of
  many organisations' names;
- **sizes are skewed** (Zipf): a few organisations hold a hundred or more strings, most
  hold one to three, so record frequencies make a large organisation's own name look
  common;
- **one organisation, many strings:** abbreviations (``Univ.``, ``Inst.``, ``HIT``),
  words dropped, the department or address parts present or not, the country in
  several forms, the order of the parts, case, and typos.

Names are invented (syllables), not drawn from any real list. Deterministic for
(n, seed); ``TUNING_SEED`` and ``TEST_SEED`` as in ``people_real.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TUNING_SEED, TEST_SEED = 11, 29

_SYL = (
    "var",
    "nex",
    "quor",
    "bit",
    "lum",
    "ant",
    "hal",
    "den",
    "mor",
    "vik",
    "sel",
    "tra",
    "pol",
    "dar",
    "ken",
    "zur",
    "bel",
    "fin",
    "gar",
    "ost",
    "ril",
    "mon",
    "tev",
    "cas",
    "lor",
    "wen",
    "brak",
    "sim",
    "ota",
    "dul",
)
FIELDS = (
    "computer science",
    "physics",
    "mathematics",
    "chemistry",
    "electrical engineering",
    "biology",
    "medicine",
    "economics",
    "statistics",
    "information systems",
)
_DEPT = ("Dept. of {}", "Department of {}", "School of {}", "{} Department", "Dept {}")
_STREETS = ("Main St", "College Rd", "Park Ave", "Harbour Rd", "Station St", "Hill Rd")
_COUNTRIES = (
    ("USA", "U.S.A.", "United States"),
    ("UK", "United Kingdom", "England"),
    ("Germany", "Deutschland", "FRG"),
    ("Canada",),
    ("China", "P.R. China", "PR China"),
    ("Australia",),
)


@dataclass(frozen=True)
class _Org:
    forms: tuple[str, ...]  # ways its name is written; the first is the full one
    city: str
    region: str
    postcode: str
    country: int
    street: str


def _word(rng: np.random.Generator, parts: int = 2) -> str:
    return "".join(rng.choice(_SYL, size=parts)).capitalize()


def _acronym(name: str) -> str:
    return "".join(w[0] for w in name.split() if w[0].isupper())


def _orgs(rng: np.random.Generator, cities: int = 30) -> list[_Org]:
    """Every organisation of the world: ``cities`` cities, 4-13 organisations each, two
    brands per city to share among the firms."""
    brands = [_word(rng) for _ in range(2 * cities)]
    societies = [_word(rng) for _ in range(4)]
    out: list[_Org] = []
    for _ in range(cities):
        city = _word(rng, int(rng.integers(2, 4)))
        region = _word(rng)[:2].upper() if rng.random() < 0.6 else _word(rng)
        country = int(rng.integers(len(_COUNTRIES)))
        post = f"{rng.integers(10_000, 99_999)}"

        def org(
            forms: tuple[str, ...], place: tuple[str, str, str, int] = (city, region, post, country)
        ) -> _Org:
            return _site(rng, forms, *place)

        out.append(org((f"University of {city}", f"Univ. of {city}", f"U. {city}", f"U{city[0]}")))
        second = rng.choice(["Institute of Technology", "State University", "Polytechnic"])
        full = f"{city} {second}"
        out.append(
            org(
                (
                    full,
                    full.replace("Institute", "Inst.").replace("University", "Univ."),
                    _acronym(full),
                )
            )
        )
        for _ in range(int(rng.integers(2, 12))):
            kind = rng.random()
            if kind < 0.45:  # a firm or its lab; a brand may be in several cities
                b = brands[int(rng.integers(len(brands)))]
                suffix = rng.choice(["Inc.", "Research", "Labs", "GmbH", "Ltd."])
                out.append(org((f"{b} {suffix}", b, f"{b.upper()} {suffix}")))
            elif kind < 0.65:
                s = _word(rng)
                out.append(org((f"{s} General Hospital", f"{s} Hospital", f"{s} Gen. Hosp.")))
            elif kind < 0.85:
                s = societies[int(rng.integers(len(societies)))]
                field = str(rng.choice(FIELDS)).title()
                full = f"{s} Institute for {field}"
                out.append(org((full, f"{s} Inst. {field}", f"{s} Institute")))
            else:
                s = _word(rng)
                out.append(org((f"{s} College", f"{s} Coll.", f"{s} College {city}")))
    return out


def _site(
    rng: np.random.Generator,
    forms: tuple[str, ...],
    city: str,
    region: str,
    post: str,
    country: int,
) -> _Org:
    """An organisation at a city's place, on a street of its own."""
    street = f"{rng.integers(1, 400)} {rng.choice(_STREETS)}"
    return _Org(forms, city, region, post, country, street)


def _render(org: _Org, dept: str | None, rng: np.random.Generator) -> str:
    """One string of ``org``: some of its parts, in some order and case, maybe a typo."""
    forms = org.forms
    name = forms[0] if rng.random() < 0.5 else forms[int(rng.integers(len(forms)))]
    parts = [name]
    if dept and rng.random() < 0.6:
        parts.insert(0, dept)
    if rng.random() < 0.15:
        parts.append(org.street)
    if rng.random() < 0.85 and org.city not in name:
        parts.append(org.city)
    if rng.random() < 0.45:
        parts.append(org.region)
    if rng.random() < 0.3:
        parts.append(org.postcode)
    if rng.random() < 0.6:
        options = _COUNTRIES[org.country]
        parts.append(options[int(rng.integers(len(options)))])
    if rng.random() < 0.1 and len(parts) > 2:
        parts = parts[1:] + parts[:1]
    text = ", ".join(parts) if rng.random() < 0.8 else " ".join(parts)
    if rng.random() < 0.1:
        text = text.upper()
    if rng.random() < 0.15:
        text = _typo(text, rng)
    return text


def _typo(text: str, rng: np.random.Generator) -> str:
    at = int(rng.integers(1, max(len(text) - 1, 2)))
    op = rng.integers(3)
    if op == 0:
        return text[:at] + text[at + 1 :]
    if op == 1:
        return text[:at] + text[at:][1:2] + text[at:][:1] + text[at + 2 :]
    return text[:at] + str(rng.choice(list("aeinorst"))) + text[at + 1 :]


def org_places(n: int = 2_500, seed: int = TUNING_SEED, cities: int = 30) -> list[dict[str, str]]:
    """``n`` affiliation strings with their organisation, as records ``rec_id``,
    ``entity`` and ``affiliation`` (Leipzig's field name, so every system reads it as it
    reads Leipzig).

    Organisations are drawn with Zipf weights (exponent 0.9 over a random order), so a
    few hold a hundred strings or more and most one to three; each string of an
    organisation keeps one of two departments of its own (most affiliations of a lab
    name the same department) or none.
    """
    rng = np.random.default_rng(seed)
    orgs = _orgs(rng, cities)
    weight = 1.0 / np.arange(1, len(orgs) + 1) ** 0.9
    weight = weight[rng.permutation(len(orgs))]
    which = rng.choice(len(orgs), size=n, p=weight / weight.sum())
    depts = [
        [str(rng.choice(_DEPT)).format(str(rng.choice(FIELDS)).title()) for _ in range(2)]
        for _ in orgs
    ]
    rows = []
    for i, o in enumerate(which.tolist()):
        dept = depts[o][int(rng.integers(2))] if rng.random() < 0.7 else None
        rows.append(
            {"rec_id": f"o{i}", "entity": f"org{o}", "affiliation": _render(orgs[o], dept, rng)}
        )
    return rows
