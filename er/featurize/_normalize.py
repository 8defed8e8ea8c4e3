"""Deterministic normalisers, one per field type: raw value -> canonical text or None.

None means "no evidence": the value is missing, or it cannot be read as its type (an
impossible date, a 40-digit phone). Such a record is still resolved on its other
fields; the writer counts each unreadable value per field (``er status``).

Each normaliser depends only on its input, so a replayed batch normalises alike.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache
from typing import Any

__all__ = ["NORMALISERS", "missing", "normalise", "read_date"]

_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)
_SPACES = re.compile(r"\s+")
_NON_ALNUM = re.compile(r"[^0-9A-Za-z]")
# letters written with dots ("L.L.C.", "S.p.A.", "N.V."): one word, so a legal form is seen
_INITIALS = re.compile(r"\b(?:[A-Za-z]\.){2,}")
_TITLES = frozenset({"mr", "mrs", "ms", "miss", "dr", "prof", "sir", "mx"})
_ORG_SUFFIXES = frozenset(
    [
        "inc",
        "incorporated",
        "ltd",
        "limited",
        "llc",
        "llp",
        "corp",
        "corporation",
        "co",
        "company",
        "gmbh",
        "mbh",
        "ag",
        "sa",
        "sas",
        "sarl",
        "nv",
        "bv",
        "plc",
        "kg",
        "kgaa",
        "spa",
        "srl",
        "ab",
        "oy",
        "as",
        "asa",
        "aps",
        "pty",
        "pte",
        "bhd",
        "kk",
    ]
)
_STREET_WORDS = {
    "street": "st",
    "road": "rd",
    "avenue": "ave",
    "av": "ave",
    "drive": "dr",
    "court": "ct",
    "place": "pl",
    "crescent": "cres",
    "lane": "ln",
    "terrace": "tce",
    "parade": "pde",
    "highway": "hwy",
    "boulevard": "blvd",
    "circuit": "cct",
    "close": "cl",
    "square": "sq",
    "grove": "gr",
    "way": "wy",
    "north": "n",
    "south": "s",
    "east": "e",
    "west": "w",
    "apartment": "unit",
    "apt": "unit",
    "flat": "unit",
}
_MONTHS = {
    m: i + 1
    for i, names in enumerate(
        (
            "jan january",
            "feb february",
            "mar march",
            "apr april",
            "may",
            "jun june",
            "jul july",
            "aug august",
            "sep sept september",
            "oct october",
            "nov november",
            "dec december",
        )
    )
    for m in names.split()
}
MONTH_WORDS = frozenset(_MONTHS)  # a month's names as dates write them, folded
# Two-digit years read as the most recent past year with those digits, as of the
# first version of this rule (2026): "68" is 1968, "05" is 2005. Fixed, not "today",
# so that a replay next year reads the same value.
_PIVOT_YEAR = 2026
PHONE_DIGITS = 9  # see normalise_phone


def _fold(value: Any) -> str:
    """Lower-cased text without accents, punctuation or repeated spaces."""
    text = unicodedata.normalize("NFKD", str(value))
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    return _SPACES.sub(" ", _PUNCT.sub(" ", text)).strip()


def normalise_person_name(value: Any) -> str | None:
    """ "Dr. Anne-Marie  O'Hill" -> "anne marie o hill" (titles dropped)."""
    words = [w for w in _fold(value).replace("_", " ").split() if w not in _TITLES]
    return " ".join(words) or None


def normalise_org_name(value: Any) -> str | None:
    """ "ACME Widgets, Inc." -> "acme widgets"; "&" reads "and"; legal forms dropped,
    dotted ones too ("Acme L.L.C.", "Fiat S.p.A.").

    A name made only of a legal form keeps it ("AG" stays "ag").
    """
    text = _INITIALS.sub(lambda m: m.group(0).replace(".", ""), str(value))  # "L.L.C." -> "LLC"
    words = _fold(text.replace("&", " and ")).split()
    kept = [w for w in words if w not in _ORG_SUFFIXES]
    return " ".join(kept or words) or None


def normalise_address(value: Any) -> str | None:
    """ "179 Lake Road" and "179 lake rd." -> "179 lake rd" (the usual abbreviations)."""
    words = [_STREET_WORDS.get(w, w) for w in _fold(value).split()]
    return " ".join(words) or None


def normalise_text(value: Any) -> str | None:
    """Folded free text (places and long strings)."""
    return _fold(value) or None


def normalise_category(value: Any) -> str | None:
    """A code such as a state or sex, folded and without spaces."""
    return _fold(value).replace(" ", "") or None


def normalise_identifier(value: Any) -> str | None:
    """ "883-58-1631", "883 58 1631" and "883581631" -> "883581631".

    Letters are kept (upper-cased); a value of one character or over 40 is no id.
    """
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = _NON_ALNUM.sub("", str(value)).upper()
    return text if 2 <= len(text) <= 40 else None


def normalise_postcode(value: Any) -> str | None:
    """Postcodes as identifiers: "SW1A 1AA" -> "SW1A1AA"; "2600" stays."""
    return normalise_identifier(value)


def normalise_phone(value: Any) -> str | None:
    """The last nine digits: "0405 771 490", "+61 405 771 490", "61405771490" agree.

    The national significant number of most numbering plans is 8 to 10 digits, and
    everything before it (international prefix, country code, trunk 0) differs by how
    a person wrote it, not by who they are. With no region known (records do not say
    one), cutting to the last nine digits makes those prefixes irrelevant;
    ``phonenumbers`` needs a region to do the same for national layouts. A value of
    fewer than 6 or more than 15 digits (E.164's maximum) is not a phone.
    """
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    digits = "".join(c for c in str(value) if c.isdigit())
    if not 6 <= len(digits) <= 15:
        return None
    return digits[-PHONE_DIGITS:]


def normalise_email(value: Any) -> str | None:
    """Lower-cased address with one "@" and a dotted domain; anything else is None."""
    text = str(value).strip().lower()
    local, at, domain = text.partition("@")
    if not at or not local or "." not in domain or "@" in domain or " " in text:
        return None
    return text


def normalise_number(value: Any) -> str | None:
    """A finite number in a canonical form ("1,234.50" -> "1234.5")."""
    try:
        x = float(str(value).replace(",", "").strip())
    except ValueError:
        return None
    if x != x or x in (float("inf"), float("-inf")):
        return None
    return repr(int(x)) if x.is_integer() else repr(x)


def normalise_date(value: Any) -> str | None:
    """Every reading of a date as YYYYMMDD, "|"-joined when the layout is ambiguous.

    "2000-10-23", "23/10/2000", "20001023", "23 Oct 2000", "Oct 23, 2000" and
    "23.10.00" all give "20001023"; "03/04/2001" gives "20010403|20010304" (day first,
    then month first). See :func:`read_date`.
    """
    readings = read_date(value)
    return "|".join(readings) if readings else None


def read_date(value: Any) -> tuple[str, ...]:
    """The valid calendar readings of a date value, most likely first.

    Written by hand rather than with ``dateutil.parser``: dateutil returns one
    reading of an ambiguous date (by a dayfirst flag the data cannot set), and a
    record linker needs both; numeric layouts are also 30x faster this way. Month
    names ("23 Oct 2000", "October 23, 2000") are read here too.
    """
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return _read_date(str(value).strip().lower())


@lru_cache(maxsize=200_000)
def _read_date(text: str) -> tuple[str, ...]:
    parts = [p for p in re.split(r"[\s/.,-]+", text) if p]
    if len(parts) == 1 and parts[0].isdigit() and len(parts[0]) == 8:
        p = parts[0]
        if int(p[:4]) >= 1000:  # YYYYMMDD
            return _valid([(p[:4], p[4:6], p[6:])])
        return _valid([(p[4:], p[2:4], p[:2]), (p[4:], p[:2], p[2:4])])  # DDMMYYYY, MMDDYYYY
    if len(parts) != 3:
        return ()
    named = [i for i, p in enumerate(parts) if p.rstrip(".") in _MONTHS]
    if named:
        i = named[0]
        month = str(_MONTHS[parts[i].rstrip(".")])
        rest = [p for k, p in enumerate(parts) if k != i]
        day, year = (rest[0], rest[1]) if len(rest[1]) >= len(rest[0]) else (rest[1], rest[0])
        return _valid([(year, month, day)])
    if not all(p.isdigit() for p in parts):
        return ()
    a, b, c = parts
    if len(a) == 4:  # YYYY-MM-DD (YYYY-DD-MM is not a layout people use)
        return _valid([(a, b, c)])
    return _valid([(c, b, a), (c, a, b)])  # day first, then month first


def _valid(candidates: list[tuple[str, str, str]]) -> tuple[str, ...]:
    out: list[str] = []
    for y, m, d in candidates:
        if not (y.isdigit() and m.isdigit() and d.isdigit()) or len(y) not in (2, 4):
            continue
        year, month, day = int(y), int(m), int(d)
        if len(y) == 2:
            year += 2000 if year <= _PIVOT_YEAR - 2000 else 1900
        if not (1 <= month <= 12 and 1 <= day <= _days_in(year, month) and year >= 1000):
            continue
        text = f"{year:04d}{month:02d}{day:02d}"
        if text not in out:
            out.append(text)
    return tuple(out)


def _days_in(year: int, month: int) -> int:
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


NORMALISERS: dict[str, Callable[[Any], str | None]] = {
    "person_name": normalise_person_name,
    "org_name": normalise_org_name,
    "date": normalise_date,
    "event_date": normalise_date,
    "phone": normalise_phone,
    "email": normalise_email,
    "identifier": normalise_identifier,
    "address": normalise_address,
    "postcode": normalise_postcode,
    "place": normalise_text,
    "category": normalise_category,
    "number": normalise_number,
    "text": normalise_text,
}


# What exports write for "no value": SQL's NULL, pandas' NaN ("nan" once a frame is
# made text), R's NA, a spreadsheet's #N/A. As values, every two records holding one
# would agree on it exactly. "NA" counts in capitals alone and "Nan" never (a surname
# "Na", a given name "Nan"); "none" is a value (PATSTAT's co-authors write NONE for a
# patent without any, which its firm's patents share; bench/RESULTS.md, "Entity
# resolution quality on held-out sets (issue #53)").
_MISSING = frozenset({"null", "n/a", "#n/a", "(null)", "<null>"})  # in any case
_MISSING_EXACT = frozenset({"NA", "NaN", "nan", "NAN"})


def missing(value: Any) -> bool:
    """Whether ``value`` holds no value: None, blank, or a marker of a missing one."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    if not isinstance(value, str):
        return False
    text = value.strip()
    return not text or text in _MISSING_EXACT or text.lower() in _MISSING


def normalise(kind: str, value: Any) -> str | None:
    """Normalise one value of a field of type ``kind`` (None for missing values:
    :func:`missing`)."""
    if missing(value):
        return None
    return NORMALISERS[kind](value)
