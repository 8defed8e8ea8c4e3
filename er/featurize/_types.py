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
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["FIELD_TYPES", "infer_field_types"]

FIELD_TYPES = (
    "person_name",
    "org_name",
    "date",
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

# Field-name patterns, first match wins. A name says more than a few values do:
# "soc_sec_id" holds digits like a phone would, "postcode" digits like an id.
_BY_NAME: tuple[tuple[str, str], ...] = (
    (r"e_?mail", "email"),
    (r"phone|mobile|cell|tel(ephone)?$|fax", "phone"),
    (r"birth|dob|date|_dt$|_on$", "date"),
    (r"post_?code|zip|postal", "postcode"),
    (r"given|first|fore|fname|middle|surname|last_?name|family|lname|maiden", "person_name"),
    (r"assignee|company|organi[sz]ation|employer|firm|^org", "org_name"),
    (r"street|address|addr", "address"),
    (r"suburb|city|town|locality|county|district|municipality", "place"),
    (r"state|country|region|province|sex|gender|title|status|type$|kind$", "category"),
    (r"ssn|soc_?sec|passport|licen[cs]e|nin$|tax|_id$|^id_|code$|number$|_no$", "identifier"),
    (r"age$|amount|price|count|height|weight|latitude|longitude|^lat$|^lon$|^lng$", "number"),
)
_DATE_LIKE = re.compile(
    r"^\s*(\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}|\d{8}"
    r"|\d{1,2}\s+[A-Za-z]{3,9}\.?,?\s+\d{2,4}|[A-Za-z]{3,9}\.?\s+\d{1,2},?\s+\d{2,4})\s*$"
)
_PHONE_LIKE = re.compile(r"^\s*\+?[\d\s().-]{7,20}\s*$")
_EMAIL_LIKE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_CODE_LIKE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ./-]{1,30}$")
_ORG_WORDS = re.compile(
    r"\b(inc|ltd|llc|gmbh|corp|corporation|company|co|ag|sa|nv|bv|plc|limited|univ|"
    r"university|institut|institute|laborator(y|ies)|bank|group|holding|holdings|"
    r"technologies|technology|electronics|industries|international|systems|chemical|"
    r"pharma|pharmaceuticals?|kk|spa|srl|oy|ab)\b",
    re.IGNORECASE,
)
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
            if v is not None and str(v).strip():
                values[n].append(str(v))
    return {n: _type_of(n, values[n]) for n in names}


def _type_of(name: str, values: list[str]) -> str:
    key = name.lower()
    for pattern, kind in _BY_NAME:
        if re.search(pattern, key):
            return _org_or_person(kind, values)
    if key in {"name", "full_name", "fullname"}:
        return _org_or_person("person_name", values)
    return _type_by_values(values)


def _org_or_person(kind: str, values: list[str]) -> str:
    """A "name" whose values carry legal or institutional words is an organisation."""
    if kind != "person_name" or not values:
        return kind
    orgs = sum(1 for v in values if _ORG_WORDS.search(v))
    return "org_name" if orgs > 0.1 * len(values) else kind


def _type_by_values(values: list[str]) -> str:
    """The type most values look like; long or many-word values are free text."""
    if not values:
        return "text"
    votes: Counter[str] = Counter()
    for v in values[:2000]:
        votes[_look(v)] += 1
    kind, count = votes.most_common(1)[0]
    if count < 0.8 * sum(votes.values()):
        return "text"
    if kind == "code" and len(set(values)) < 0.05 * len(values):
        return "category"
    if kind == "code" and all(_NUMBER_LIKE.match(v) and "." in v for v in values[:200]):
        return "number"
    return {"code": "identifier"}.get(kind, kind)


def _look(v: str) -> str:
    if _EMAIL_LIKE.match(v):
        return "email"
    if _DATE_LIKE.match(v):
        return "date"
    digits = sum(c.isdigit() for c in v)
    if _PHONE_LIKE.match(v) and 8 <= digits <= 15 and not v.strip().isdigit():
        return "phone"
    if _ORG_WORDS.search(v):
        return "org_name"
    if len(v) > 40 or len(v.split()) > 4:
        return "text"
    if _CODE_LIKE.match(v) and digits:
        return "code"
    return "text"
