"""Realistic person records with known entities: the development data of the pair model.

Unlike ``people.py`` (FEBRL-like corruptions of one record layout), these records look
like a real customer file exported by several systems:

- **values**: given names and surnames from FEBRL's pools with Zipf frequencies (a few
  names are very common, so many different people share "smith" or "john"), streets,
  suburbs, postcodes and states likewise; dates of birth, 10-digit mobile phones,
  9-digit national ids, e-mail addresses derived from the name;
- **layouts**, per record: seven date layouts (``2000-10-23``, ``23/10/2000``,
  ``10/23/2000``, ``20001023``, ``23 Oct 2000``, ``Oct 23, 2000``, ``23.10.00``), five
  phone layouts (``0405771490``, ``0405 771 490``, ``+61 405 771 490``,
  ``61405771490``, ``(04) 0577 1490``), three id layouts (``883-58-1631``,
  ``883581631``, ``883 58 1631``), name case (lower, UPPER, Title), street types
  written out or abbreviated (``Road`` / ``Rd``);
- **people who are not the same**: households (a partner with the same surname,
  address, phone and often a shared e-mail, another given name and birth date),
  twins (same surname, birth date, address; another given name), juniors (same given
  name, surname and address, born 20-35 years later), and common names everywhere;
- **duplicates**, each with corruptions drawn from: a typo (insert, delete,
  substitute, transpose) in a name, street or suburb; a nickname (from the
  ``nicknames`` package's table); given and surname swapped; a truncated name
  (``HIL``); a new e-mail; a birth date with day and month swapped, a year off by one or
  a day changed; a phone or id digit wrong; and, at their own rates, a move (new address and
  suburb, often a new phone) and a missing field.

Levels, the rates below per duplicate (corruptions drawn independently); ``sparse``,
``crowded``, ``sparsehard`` and ``common`` are development variants (issue #53): a third
of their records keep a name part (or both) and one other field (``sparse*``,
``common``), or many more households, twins and common names (``crowded``, ``common``):

========================  ======  ====  ======  =======  ==========  ======
rate                      medium  hard  sparse  crowded  sparsehard  common
========================  ======  ====  ======  =======  ==========  ======
households (of people)     0.15   0.30   0.15    0.50      0.30       0.30
twins / juniors            0.02   0.05   0.02    0.08      0.05       0.05
name Zipf exponent         0.6    0.75   0.6     0.9       0.75       1.1
corruptions per dup        0-2    1-4    0-2     0-2       1-4        1-4
missing field              0.10   0.20   0.10    0.10      0.20       0.20
move                       0.10   0.25   0.10    0.15      0.25       0.25
two or three fields only   0      0      0.33    0         0.33       0.33
========================  ======  ====  ======  =======  ==========  ======

Deterministic for (n, level, seed). ``TUNING_SEED`` is for choosing settings,
``TEST_SEED`` for reporting them.

    python bench/people_real.py 10000 --level hard --seed 2 --format csv > people.csv
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from people import _typo  # the same typo model as the FEBRL-like people

TUNING_SEED = 1
TEST_SEED = 2
FIELDS = (
    "given_name",
    "surname",
    "dob",
    "phone",
    "email",
    "national_id",
    "address",
    "suburb",
    "postcode",
    "state",
)
STREET_TYPES = {
    "road": "rd",
    "street": "st",
    "avenue": "ave",
    "drive": "dr",
    "court": "ct",
    "place": "pl",
    "crescent": "cres",
    "lane": "ln",
    "parade": "pde",
    "close": "cl",
}
DOMAINS = ("gmail.com", "yahoo.com", "outlook.com", "bigpond.com", "hotmail.com", "icloud.com")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@dataclass(frozen=True)
class Level:
    """The rates of one difficulty level (module docstring)."""

    households: float
    twins: float
    zipf: float
    corruptions: tuple[int, int]  # per duplicate, inclusive range
    missing: float
    move: float
    sparse: float = 0.0  # share of records that keep two or three fields only


LEVELS = {
    "medium": Level(0.15, 0.02, 0.6, (0, 2), 0.10, 0.10),
    "hard": Level(0.30, 0.05, 0.75, (1, 4), 0.20, 0.25),
    # development variants (issue #53): sparse records, crowded households and names
    "sparse": Level(0.15, 0.02, 0.6, (0, 2), 0.10, 0.10, sparse=0.33),
    "crowded": Level(0.50, 0.08, 0.9, (0, 2), 0.10, 0.15),
    "sparsehard": Level(0.30, 0.05, 0.75, (1, 4), 0.20, 0.25, sparse=0.33),
    "common": Level(0.30, 0.05, 1.1, (1, 4), 0.20, 0.25, sparse=0.33),
}
# What a sparse record keeps beside its name (one or both name parts): one of these.
SPARSE_WITH = ("email", "suburb", "phone", "dob", "postcode", "address")


@cache
def _pools() -> dict[str, list[str]]:
    """Distinct values per FEBRL field, sorted (the Zipf rank order is shuffled later)."""
    from er.demo import febrl_records

    fields = ("given_name", "surname", "address_1", "suburb", "postcode", "state")
    values: dict[str, set[str]] = {f: set() for f in fields}
    for name in ("dataset1", "dataset2", "dataset3", "dataset4a"):
        for r in febrl_records(name):
            if not r["rec_id"].endswith("-org"):  # originals only: FEBRL's duplicates
                continue  # carry its own typos
            for f in fields:
                v = (r.get(f) or "").strip()
                if (v and v.replace(" ", "").isalpha()) or (f == "postcode" and v.isdigit()):
                    values[f].add(v)
    streets = sorted({" ".join(v.split()[:-1]) for v in values["address_1"] if " " in v})
    return {
        "given": sorted(values["given_name"]),
        "surname": sorted(values["surname"]),
        "street": [s for s in streets if s],
        "suburb": sorted(values["suburb"]),
        "postcode": sorted(values["postcode"]),
        "state": ["nsw", "vic", "qld", "wa", "sa", "tas", "act", "nt"],
    }


class _Sampler:
    """Zipf-weighted draws from the pools (ranks shuffled by the seed)."""

    def __init__(self, rng: np.random.Generator, exponent: float) -> None:
        self.rng = rng
        self.pools = {}
        for name, pool in _pools().items():
            order = rng.permutation(len(pool))
            weights = 1.0 / np.arange(1, len(pool) + 1) ** exponent
            self.pools[name] = ([pool[i] for i in order], weights / weights.sum())

    def draw(self, name: str) -> str:
        values, p = self.pools[name]
        return values[int(self.rng.choice(len(values), p=p))]


def _person(s: _Sampler) -> dict[str, Any]:
    """One person's true values (before any layout)."""
    rng = s.rng
    given, surname = s.draw("given"), s.draw("surname")
    return {
        "given_name": given,
        "surname": surname,
        "dob": (int(rng.integers(1935, 2006)), int(rng.integers(1, 13)), int(rng.integers(1, 29))),
        "phone": "04" + "".join(str(d) for d in rng.integers(0, 10, 8)),
        "email_user": _email_user(rng, given, surname),
        "domain": DOMAINS[int(rng.integers(0, len(DOMAINS)))],
        "national_id": "".join(str(d) for d in rng.integers(0, 10, 9)),
        **_address(s),
    }


def _address(s: _Sampler) -> dict[str, Any]:
    rng = s.rng
    kind = list(STREET_TYPES)[int(rng.integers(0, len(STREET_TYPES)))]
    return {
        "number": int(rng.integers(1, 400)),
        "street": s.draw("street"),
        "street_type": kind,
        "suburb": s.draw("suburb"),
        "postcode": s.draw("postcode"),
        "state": s.draw("state"),
    }


def _email_user(rng: np.random.Generator, given: str, surname: str) -> str:
    forms = (f"{given}.{surname}", f"{given[0]}{surname}", f"{given}{surname}{rng.integers(1, 99)}")
    return forms[int(rng.integers(0, len(forms)))]


def _relatives(s: _Sampler, person: dict[str, Any], level: Level) -> list[dict[str, Any]]:
    """Household members, twins and juniors of ``person``: other entities that share
    most of its values."""
    rng, out = s.rng, []
    if rng.random() < level.households:
        partner = dict(person, given_name=s.draw("given"), national_id=_digits(rng, 9))
        partner["dob"] = (person["dob"][0] + int(rng.integers(-6, 7)), *_month_day(rng))
        if rng.random() < 0.5:  # a shared household e-mail
            partner["email_user"] = person["email_user"]
        else:
            partner["email_user"] = _email_user(rng, partner["given_name"], person["surname"])
        out.append(partner)
    if rng.random() < level.twins:
        twin = dict(person, given_name=s.draw("given"), national_id=_digits(rng, 9))
        twin["phone"] = "04" + _digits(rng, 8)
        out.append(twin)
    if rng.random() < level.twins:
        junior = dict(person, national_id=_digits(rng, 9), phone="04" + _digits(rng, 8))
        junior["dob"] = (person["dob"][0] + int(rng.integers(20, 36)), *_month_day(rng))
        out.append(junior)
    return out


def _digits(rng: np.random.Generator, n: int) -> str:
    return "".join(str(d) for d in rng.integers(0, 10, n))


def _month_day(rng: np.random.Generator) -> tuple[int, int]:
    return int(rng.integers(1, 13)), int(rng.integers(1, 29))


# -- layouts: how one system writes a value ---------------------------------------------------
def _date(rng: np.random.Generator, ymd: tuple[int, int, int]) -> str:
    y, m, d = ymd
    layouts = (
        f"{y:04d}-{m:02d}-{d:02d}",
        f"{d:02d}/{m:02d}/{y:04d}",
        f"{m:02d}/{d:02d}/{y:04d}",
        f"{y:04d}{m:02d}{d:02d}",
        f"{d} {MONTHS[m - 1]} {y}",
        f"{MONTHS[m - 1]} {d}, {y}",
        f"{d:02d}.{m:02d}.{y % 100:02d}",
    )
    return layouts[int(rng.integers(0, len(layouts)))]


def _phone(rng: np.random.Generator, p: str) -> str:
    layouts = (
        p,
        f"{p[:4]} {p[4:7]} {p[7:]}",
        f"+61 {p[1:4]} {p[4:7]} {p[7:]}",
        f"61{p[1:]}",
        f"({p[:2]}) {p[2:6]} {p[6:]}",
    )
    return layouts[int(rng.integers(0, len(layouts)))]


def _national_id(rng: np.random.Generator, n: str) -> str:
    layouts = (f"{n[:3]}-{n[3:5]}-{n[5:]}", n, f"{n[:3]} {n[3:5]} {n[5:]}")
    return layouts[int(rng.integers(0, len(layouts)))]


def _case(rng: np.random.Generator, text: str) -> str:
    return (text.lower(), text.upper(), text.title())[int(rng.integers(0, 3))]


def _render(rng: np.random.Generator, v: dict[str, Any]) -> dict[str, str]:
    """A record of the values ``v`` as one system would write it."""
    kind = v["street_type"]
    street_type = kind if rng.random() < 0.5 else STREET_TYPES[kind]
    return {
        "given_name": _case(rng, v["given_name"]),
        "surname": _case(rng, v["surname"]),
        "dob": _date(rng, v["dob"]),
        "phone": _phone(rng, v["phone"]),
        "email": f"{v['email_user']}@{v['domain']}",
        "national_id": _national_id(rng, v["national_id"]),
        "address": _case(rng, f"{v['number']} {v['street']} {street_type}"),
        "suburb": _case(rng, v["suburb"]),
        "postcode": v["postcode"],
        "state": _case(rng, v["state"]),
    }


# -- corruptions of a duplicate's values --------------------------------------------------------
@cache
def _nicknames() -> dict[str, list[str]]:
    """Given name -> its nicknames, from the ``nicknames`` package's table."""
    from nicknames import NickNamer

    namer = NickNamer()
    return {g: sorted(namer.nicknames_of(g)) for g in _pools()["given"] if namer.nicknames_of(g)}


def _corrupters(s: _Sampler) -> list[Callable[[np.random.Generator, dict[str, Any]], None]]:
    def typo(rng: np.random.Generator, v: dict[str, Any]) -> None:
        f = ("given_name", "surname", "street", "suburb")[int(rng.integers(0, 4))]
        v[f] = _typo(rng, v[f])

    def nickname(rng: np.random.Generator, v: dict[str, Any]) -> None:
        nicks = _nicknames().get(v["given_name"])
        v["given_name"] = nicks[int(rng.integers(0, len(nicks)))] if nicks else v["given_name"]

    def swap(rng: np.random.Generator, v: dict[str, Any]) -> None:
        v["given_name"], v["surname"] = v["surname"], v["given_name"]

    def truncate(rng: np.random.Generator, v: dict[str, Any]) -> None:
        f = ("given_name", "surname")[int(rng.integers(0, 2))]
        v[f] = v[f][: max(1, len(v[f]) - int(rng.integers(1, 3)))]

    def move(rng: np.random.Generator, v: dict[str, Any]) -> None:
        v.update(_address(s))
        if rng.random() < 0.5:
            v["phone"] = "04" + _digits(rng, 8)

    def new_email(rng: np.random.Generator, v: dict[str, Any]) -> None:
        v["domain"] = DOMAINS[int(rng.integers(0, len(DOMAINS)))]
        if rng.random() < 0.5:
            v["email_user"] = _email_user(rng, v["given_name"], v["surname"])

    def dob(rng: np.random.Generator, v: dict[str, Any]) -> None:
        y, m, d = v["dob"]
        if rng.random() < 0.5 and d <= 12:
            v["dob"] = (y, d, m)
        else:
            v["dob"] = (
                (y + int(rng.choice([-1, 1])), m, d) if rng.random() < 0.5 else (y, m, d % 28 + 1)
            )

    def digit(rng: np.random.Generator, v: dict[str, Any]) -> None:
        f = ("phone", "national_id")[int(rng.integers(0, 2))]
        i = int(rng.integers(2, len(v[f])))
        v[f] = v[f][:i] + str(int(rng.integers(0, 10))) + v[f][i + 1 :]

    return [typo, typo, nickname, swap, truncate, new_email, dob, digit]


def real_people(
    n_records: int, *, level: str = "hard", seed: int = TEST_SEED
) -> list[dict[str, str]]:
    """``n_records`` shuffled records with ``rec_id`` and gold ``entity``.

    Parameters
    ----------
    n_records : int
    level : {"medium", "hard"}
    seed : int
        :data:`TUNING_SEED` to choose settings, :data:`TEST_SEED` to report them.
    """
    rates = LEVELS[level]
    rng = np.random.default_rng([seed, n_records, 0 if level == "medium" else 1])
    sampler = _Sampler(rng, rates.zipf)
    corrupt = _corrupters(sampler)
    out: list[dict[str, str]] = []
    entity = 0
    while len(out) < n_records:
        person = _person(sampler)
        for values in [person, *_relatives(sampler, person, rates)]:
            out += _records_of(rng, values, entity, rates, corrupt)
            entity += 1
    out = out[:n_records]
    return [out[i] for i in rng.permutation(len(out))]


PEOPLE = (
    "people",
    "real-medium",
    "real-hard",
    "real-sparse",
    "real-common",
    "people-text",
    "orgs-text",
)
# One string column (#56 must-show 2): organisations sharing places (bench/orgs.py, a
# city per ORG_STRINGS_PER_CITY strings, as the quality sets orgs-places-*) and the
# medium people as one string (as the quality sets people-text-*).
ORG_STRINGS_PER_CITY = 83


def people_records(
    people: str, n: int, *, seed: int | None = None, window: int | None = None
) -> list[dict[str, str]]:
    """``n`` records of a benchmark's ``--people`` choice: ``people`` is
    ``bench/people.py`` (the 1M runs' generator; ``window`` sends it as a steady
    stream), ``real-LEVEL`` this generator at that level (shuffled; no window);
    ``people-text`` the medium level as one ``text`` string, ``orgs-text``
    ``bench/orgs.py``'s affiliation strings (one column each, free text).
    ``seed`` None: each generator's own default (its test seed here)."""
    if people == "people":
        from people import synthetic_people

        return synthetic_people(n, seed=seed or 0, window=window)
    if window is not None:
        raise SystemExit("--window is bench/people.py's; real-LEVEL records come shuffled")
    seed = TEST_SEED if seed is None else seed
    if people == "orgs-text":
        from orgs import TEST_SEED as ORGS_TEST
        from orgs import org_places

        cities = max(1, round(n / ORG_STRINGS_PER_CITY))
        return org_places(n, seed=ORGS_TEST if seed == TEST_SEED else seed, cities=cities)
    if people == "people-text":
        rows = real_people(n, level="medium", seed=seed)
        return [one_string(r) for r in rows]
    level = people.removeprefix("real-")
    return real_people(n, level=level, seed=seed)


# The fields a person record joins into one string (bench/datasets.py's people-text-*).
TEXT_FIELDS = ("given_name", "surname", "dob", "address", "suburb", "postcode", "state")


def one_string(r: dict[str, str]) -> dict[str, str]:
    """A person record as one ``text`` field: its non-empty :data:`TEXT_FIELDS`."""
    text = " ".join(r[f] for f in TEXT_FIELDS if r.get(f))
    return {"rec_id": r["rec_id"], "entity": r["entity"], "text": text}


def _records_of(
    rng: np.random.Generator,
    values: dict[str, Any],
    entity: int,
    rates: Level,
    corrupt: list[Callable[[np.random.Generator, dict[str, Any]], None]],
) -> list[dict[str, str]]:
    """The records of one person: the first as the values are, then duplicates."""
    n = min(int(rng.geometric(0.45)), 8)
    records = []
    for k in range(n):
        v = dict(values)
        if k:
            lo, hi = rates.corruptions
            for _ in range(int(rng.integers(lo, hi + 1))):
                corrupt[int(rng.integers(0, len(corrupt)))](rng, v)
            if rng.random() < rates.move:
                corrupt[4 + 0](rng, v) if False else v.update(_moved(rng, v))
        rec = _render(rng, v)
        if k and rng.random() < rates.missing:
            rec[FIELDS[int(rng.integers(0, len(FIELDS)))]] = ""
        if rng.random() < rates.sparse:
            rec = _sparse(rng, rec)
        records.append({"rec_id": f"r{entity}-{k}", **rec, "entity": str(entity)})
    return records


def _sparse(rng: np.random.Generator, rec: dict[str, str]) -> dict[str, str]:
    """The record with two or three fields left: a name part or both, and one other
    (a common name and an e-mail, a surname and a suburb)."""
    names = (("given_name", "surname"), ("surname",), ("given_name",))[int(rng.integers(0, 3))]
    keep = {*names, SPARSE_WITH[int(rng.integers(0, len(SPARSE_WITH)))]}
    return {f: (v if f in keep else "") for f, v in rec.items()}


def _moved(rng: np.random.Generator, v: dict[str, Any]) -> dict[str, Any]:
    """A new address (and often a new phone) for the same person."""
    number, street_type = int(rng.integers(1, 400)), list(STREET_TYPES)[int(rng.integers(0, 10))]
    pools = _pools()
    out = {
        "number": number,
        "street": pools["street"][int(rng.integers(0, len(pools["street"])))],
        "street_type": street_type,
        "suburb": pools["suburb"][int(rng.integers(0, len(pools["suburb"])))],
        "postcode": pools["postcode"][int(rng.integers(0, len(pools["postcode"])))],
        "state": pools["state"][int(rng.integers(0, len(pools["state"])))],
    }
    if rng.random() < 0.5:
        out["phone"] = "04" + _digits(rng, 8)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int)
    ap.add_argument("--level", choices=sorted(LEVELS), default="hard")
    ap.add_argument("--seed", type=int, default=TEST_SEED)
    ap.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    args = ap.parse_args()
    records = real_people(args.n, level=args.level, seed=args.seed)
    if args.format == "csv":
        w = csv.DictWriter(sys.stdout, fieldnames=list(records[0]))
        w.writeheader()
        w.writerows(records)
    else:
        for rec in records:
            sys.stdout.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
