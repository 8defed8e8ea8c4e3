"""Field types: what each record field holds, inferred from names and values.

A type decides two things: the field's deterministic normaliser
(:mod:`er.featurize._normalize`) and its comparison levels in the pair model
(:mod:`er.match`). Types are inferred once, from the first batch, shown to the
user, stored with the collection and overridable in its config, so that a replayed
batch is normalised exactly as before.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from er.featurize._normalize import missing

__all__ = ["FIELD_TYPES", "infer_field_types"]

FIELD_TYPES = (
    "person_name",
    "org_name",
    "date",
    "event_date",
    "phone",
    "email",
    "identifier",
    "address",
    "postcode",
    "place",
    "category",
    "number",
    "text",
)

# Field-name patterns over the header's words joined by "_" (camelCase, spaces, dots
# and hyphens split: "inventorNameLast" -> "inventor_name_last"), first match wins. A
# name says more than a few values do: "soc_sec_id" holds digits like a phone would,
# "postcode" digits like an id. Each kind has stems found anywhere ("homephone",
# "streetaddress") and short words found only whole ("id", "no", "on" last), which
# inside other words mean nothing ("video", "phonetic"... "name_on_card").
_NAME_PART = r"(first|given|fore|last|sur|family|middle|maiden|nick)"
_BY_NAME: tuple[tuple[str, str, str], ...] = (
    (r"e_?mail", r"", "email"),
    (r"phone|mobile|telephone|fax", r"tel|cell", "phone"),
    (r"birth", r"dob|born", "date"),
    # any other date is an event's (a patent's, an order's, a visit's): records of one
    # entity differ on it, so it is weighed as context, never as who someone is
    (r"date", r"dt$|on$", "event_date"),
    (r"post_?code|zip|postal", r"", "postcode"),
    (
        rf"{_NAME_PART}_?names?|names?_{_NAME_PART}|surname|forename|maiden|initials",
        r"[flm]name|middle|initial",
        "person_name",
    ),
    (
        r"assignee|company|organi[sz]ation|employer|business|vendor|merchant",
        r"firm|org",
        "org_name",
    ),
    # a house, flat or unit number, or a household's id, is a code many homes share, not
    # who lives there (pseudopeople's `unit_number`, "apt 3", was typed an identifier)
    (r"house_?(number|no|num)|household|apartment", r"apt|unit|flat|suite", "category"),
    (r"street|address|addr", r"", "address"),
    (r"suburb|city|town|locality|county|district|municipality", r"", "place"),
    (r"state|country|region|province|gender|status|category", r"sex|title|type|kind", "category"),
    (r"ssn|soc_?sec|passport|licen[cs]e|tax", r"nin|id|code|number|no|num", "identifier"),
    (r"amount|price|count|height|weight|latitude|longitude", r"age|lat|lon|lng", "number"),
)
# A "name" alone, or a person's ("author_name", "inventor name"), is a person's name
# unless its values say otherwise (_checked); "user_name" or "file_name" are not.
_PLAIN_NAME = re.compile(
    r"^((author|inventor|applicant|customer|client|patient|person|contact|owner|holder|"
    r"member|employee|student|driver|passenger|guest|full)_?)?names?$"
)
_DATE_LIKE = re.compile(
    r"^\s*(\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}|\d{8}"
    r"|\d{1,2}\s+[A-Za-z]{3,9}\.?,?\s+\d{2,4}|[A-Za-z]{3,9}\.?\s+\d{1,2},?\s+\d{2,4})\s*$"
)
_PHONE_LIKE = re.compile(r"^\s*\+?[\d\s()./-]{7,20}\s*$")
_EMAIL_LIKE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_CODE_LIKE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ./-]{0,30}$")
_ORG_WORDS = re.compile(
    r"\b(inc|ltd|llc|gmbh|corp|corporation|company|co|ag|sa|nv|bv|plc|limited|univ|"
    r"university|institut|institute|laborator(y|ies)|bank|group|holding|holdings|"
    r"technologies|technology|electronics|industries|international|systems|chemical|"
    r"pharma|pharmaceuticals?|kk|spa|srl|oy|ab)\b",
    re.IGNORECASE,
)
# Values a header-named identifier needs before its repeats can make it a category.
IDENTIFIER_SAMPLE = 100
_NUMBER_LIKE = re.compile(r"^\s*[-+]?\d+(\.\d+)?([eE][-+]?\d+)?\s*$")


def infer_field_types(
    records: Iterable[Mapping[str, Any]], fields: Iterable[str]
) -> dict[str, str]:
    """The type of each field, from its name, else from most of its values.

    Parameters
    ----------
    records : iterable of mapping
        A sample (the collection's first batch).
    fields : iterable of str
        The featurized fields.

    Returns
    -------
    dict
        Field name -> one of :data:`FIELD_TYPES`.
    """
    names = list(fields)
    values: dict[str, list[str]] = {n: [] for n in names}
    for rec in records:
        for n in names:
            v = rec.get(n)
            if not missing(v):
                values[n].append(str(v))
    return {n: _type_of(n, values[n]) for n in names}


def header_words(name: str) -> str:
    """A header as lower-case words joined by "_": ``"inventorNameLast"``,
    ``"Inventor Name-Last"`` and ``"inventor.name_last"`` all give
    ``"inventor_name_last"``."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name.strip())
    return "_".join(w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w)


def _type_of(name: str, values: list[str]) -> str:
    key = header_words(name)
    for stems, words, kind in _BY_NAME:
        if re.search(stems, key) or (words and re.search(rf"(^|_)({words})(_|$)", key)):
            return _checked(kind, values)
    if _PLAIN_NAME.search(key):
        kind = _checked("person_name", values)
        return "org_name" if kind == "person_name" and _named_by_phrase(key, values) else kind
    return _type_by_values(values)


# Words that join the parts of a business's name ("grill on the alley", "gotham bar &
# grill", "arnie mortons of chicago") and not a person's ("de", "van", "la" do both).
_CONNECTIVES = frozenset({"the", "of", "and", "&", "at", "for", "on"})
_WORD_SPLIT = re.compile(r"[^a-z&]+|(?=&)|(?<=&)")
# A bare "name" column is a business's when this share of its values holds a connective:
# between the restaurants' and the person-name columns' shares (bench/RESULTS.md,
# "Entity resolution quality on held-out sets (issue #53)").
CONNECTIVE_SHARE = 0.05


def _named_by_phrase(key: str, values: list[str]) -> bool:
    """A bare "name" column whose values are phrases: CONNECTIVE_SHARE of them or more
    hold a connective word. A header that names whose name it is ("author_name") is
    taken at its word."""
    if key not in ("name", "names") or not values:
        return False
    sample = values[:2000]
    joined = sum(1 for v in sample if _CONNECTIVES & set(_WORD_SPLIT.split(v.lower())))
    return joined >= CONNECTIVE_SHARE * len(sample)


def _checked(kind: str, values: list[str]) -> str:
    """The header's type, unless the values are plainly another's: sentences are text
    (a "title" of a patent, a "name" holding a firm and its address), a "name" with
    legal or institutional words, or of many words, an organisation's."""
    if not values:
        return kind
    if kind in ("date", "event_date", "email", "phone"):
        # a "name_on_card" or a "dt_status" the header misleads on: the values decide
        sample = values[:2000]
        read = sum(1 for v in sample if _reads_as(kind, v))
        return kind if read >= 0.5 * len(sample) else _type_by_values(values)
    if kind in ("number", "postcode"):
        return kind
    if kind == "identifier" and len(values) >= IDENTIFIER_SAMPLE and _few_values(values):
        # an identifier tells records apart; one a handful of values fill (a
        # "tax_year", a "license_class") is a category; a few records may all be one's
        return "category"
    if kind in ("person_name", "org_name") and _lettered(values) < 0.5:
        # a "company_number" of digits: a name's header over codes, which the values type
        return _type_by_values(values)
    if kind == "address" and _integers(values):
        # a house number alone ("street_number"): a code that many homes share
        return "category"
    if _sentences(values):
        return "text"
    if kind == "person_name":
        sample = values[:2000]
        orgs = sum(1 for v in sample if _org_words(v))
        words = sum(len(v.split()) for v in sample) / len(sample)
        if orgs > 0.1 * len(sample) or words > 3.5:
            return "org_name"
        if _numbered(values):
            # a "name" with a model number or a size ("sony bravia kdl-40v3000"): a
            # product's, compared as text, never as who someone is
            return "text"
    return kind


def _reads_as(kind: str, v: str) -> bool:
    """Whether a value could be of the header's date, e-mail or phone type (a phone's
    digits alone count: "0405771490")."""
    if kind in ("date", "event_date"):
        return bool(_DATE_LIKE.match(v))
    if kind == "email":
        return bool(_EMAIL_LIKE.match(v))
    return bool(_PHONE_LIKE.match(v)) and 7 <= sum(c.isdigit() for c in v) <= 15


def _sentences(values: list[str]) -> bool:
    """Most values are long or of many words, and few repeat: free text."""
    sample = values[:2000]
    long = sum(1 for v in sample if len(v) > 40 or len(v.split()) > 5)
    return long > 0.5 * len(sample) and len(set(sample)) > 0.5 * len(sample)


def _type_by_values(values: list[str]) -> str:
    """The type most values look like; long or many-word values are free text."""
    if not values:
        return "text"
    votes: Counter[str] = Counter()
    for v in values[:2000]:
        votes[_look(v)] += 1
    kind, count = votes.most_common(1)[0]
    if kind in ("word", "org_name") and _few_values(values):
        # a handful of short values is a category whatever they look like: language
        # codes ("eng", "spa": S.p.A., an organisation's word), legal forms, years
        return "category"
    if count < 0.8 * sum(votes.values()):
        return "text"
    if kind == "word":  # short letters alone, more than a handful: a name or a place
        return "person_name"
    if kind == "code" and (_few_values(values) or _small_integers(values)):
        return "category"
    if kind == "code" and all(_NUMBER_LIKE.match(v) and "." in v for v in values[:200]):
        return "number"
    return {"code": "identifier"}.get(kind, kind)


# A person's name holds no digit but by a typo: a "name" column of which this share of
# values holds one names products (the people, inventors' and restaurants' name columns
# of bench/datasets.py hold one in under 0.1% of values).
NUMBERED_SHARE = 0.2


def _numbered(values: list[str]) -> bool:
    """Whether NUMBERED_SHARE of the values (of the first 2,000) hold a digit."""
    return _share(values, str.isdigit) >= NUMBERED_SHARE


def _org_words(v: str) -> bool:
    """Whether a value holds a legal form or an institution's word, dotted ones too
    ("N.V.", "S.p.A.", "L.L.C.")."""
    return bool(_ORG_WORDS.search(v) or _ORG_WORDS.search(v.replace(".", "")))


def _lettered(values: list[str]) -> float:
    """The share of values (of the first 2,000) holding a letter."""
    return _share(values, str.isalpha)


def _share(values: list[str], holds: Callable[[str], bool]) -> float:
    """The share of values (of the first 2,000) with a character that ``holds``."""
    sample = values[:2000]
    return sum(1 for v in sample if any(holds(c) for c in v)) / max(len(sample), 1)


def _integers(values: list[str]) -> bool:
    """Most values (80%) are whole numbers."""
    sample = values[:2000]
    return sum(1 for v in sample if v.strip().isdigit()) >= 0.8 * len(sample)


def _small_integers(values: list[str]) -> bool:
    """Integers of one or two digits alone (a month, a day of the month, a floor): at
    most 100 values whatever the sample's size, compared equal or not, a category's
    (a day read as an identifier was "one character off" from 11 other days, and one
    read as free text, a single digit, could not disagree)."""
    return all(v.strip().isdigit() and len(v.strip()) <= 2 for v in values[:2000])


def _few_values(values: list[str]) -> bool:
    """A handful of distinct values (under 5% of them, or under 12 and half): a
    category's."""
    distinct = len(set(values))
    return distinct < 0.05 * len(values) or distinct < min(12, 0.5 * len(values))


def _digits_date(v: str) -> bool:
    """Whether eight digits read as a date (year, month and day in some order): a
    company's or a case's number of eight digits does not."""
    y1, m1, d1 = int(v[:4]), int(v[4:6]), int(v[6:])
    d2, m2, y2 = int(v[:2]), int(v[2:4]), int(v[4:])
    ymd = 1800 <= y1 <= 2100 and 1 <= m1 <= 12 and 1 <= d1 <= 31
    dmy = 1800 <= y2 <= 2100 and (1 <= m2 <= 12 or 1 <= d2 <= 12) and min(d2, m2) >= 1
    return ymd or (dmy and max(d2, m2) <= 31)


def _look(v: str) -> str:
    if _EMAIL_LIKE.match(v):
        return "email"
    if _DATE_LIKE.match(v) and (not v.strip().isdigit() or _digits_date(v.strip())):
        return "date"
    digits = sum(c.isdigit() for c in v)
    if _PHONE_LIKE.match(v) and 8 <= digits <= 15 and not v.strip().isdigit():
        return "phone"
    words = v.split()
    if len(v) > 40 or len(words) > 4 or (digits and len(words) > 3):
        return "text"  # a firm with its address is text, whatever its legal form
    if _org_words(v):
        return "org_name"
    if _CODE_LIKE.match(v) and digits:
        return "code"
    if all(w.replace("-", "").replace("'", "").isalpha() for w in words) and len(words) <= 3:
        return "word"
    return "text"
