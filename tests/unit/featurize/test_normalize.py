"""Typed normalisers and type inference against hand-worked values and the calendar."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from er.featurize._normalize import NORMALISERS, normalise, read_date
from er.featurize._types import infer_field_types

LAYOUTS = (
    "%Y-%m-%d",
    "%d/%m/%Y",
    "%Y%m%d",
    "%d %b %Y",
    "%b %d, %Y",
    "%d.%m.%y",
    "%B %d %Y",
)


@settings(max_examples=300, deadline=None)
@given(day=st.dates(dt.date(1927, 1, 1), dt.date(2025, 12, 31)), layout=st.sampled_from(LAYOUTS))
def test_every_layout_reads_the_calendar_date(day: dt.date, layout: str) -> None:
    # Oracle: the standard library's own formatting of the same calendar date.
    readings = read_date(day.strftime(layout))
    assert day.strftime("%Y%m%d") in readings
    if layout in ("%Y-%m-%d", "%Y%m%d", "%d %b %Y", "%b %d, %Y", "%B %d %Y"):
        assert readings == (day.strftime("%Y%m%d"),)  # no ambiguity in these layouts


def test_ambiguous_dates_are_read_both_ways() -> None:
    assert normalise("date", "03/04/2001") == "20010403|20010304"
    assert normalise("date", "13/04/2001") == "20010413"  # 13 cannot be a month
    assert normalise("date", "04/13/2001") == "20010413"
    assert normalise("date", "23.10.00") == "20001023"
    assert normalise("date", "23.10.68") == "19681023"


@pytest.mark.parametrize("bad", ["31/02/2000", "2000-13-01", "tomorrow", "1/2", "99999999"])
def test_impossible_dates_are_no_evidence(bad: str) -> None:
    assert normalise("date", bad) is None


def test_phones_agree_across_layouts() -> None:
    forms = ["0405771490", "61405771490", "+61 405 771 490", "(04) 0577-1490", "0405 771 490"]
    assert {normalise("phone", f) for f in forms} == {"405771490"}
    assert normalise("phone", "1" * 40) is None
    assert normalise("phone", "12345") is None


def test_identifiers_keep_their_characters_only() -> None:
    assert {normalise("identifier", x) for x in ("883-58-1631", "883581631", "883 58 1631")} == {
        "883581631"
    }
    assert normalise("identifier", "x" * 41) is None


def test_names_addresses_and_organisations() -> None:
    assert normalise("person_name", "Dr. Anne-Marie  O'Hill") == "anne marie o hill"
    assert normalise("person_name", "José") == "jose"
    assert normalise("address", "179 Lake Road") == normalise("address", "179 lake rd.")
    assert normalise("org_name", "ACME Widgets, Inc.") == "acme widgets"
    assert normalise("org_name", "Smith & Sons Ltd") == "smith and sons"
    assert normalise("org_name", "AG") == "ag"
    # legal forms written with dots are legal forms too (issue #55)
    assert normalise("org_name", "Acme Widgets L.L.C.") == "acme widgets"
    assert normalise("org_name", "Fiat S.p.A.") == normalise("org_name", "Fiat SpA") == "fiat"
    assert normalise("org_name", "J. R. Smith Co.") == "j r smith"  # initials stay
    assert normalise("email", " Anne.Hill@Example.COM ") == "anne.hill@example.com"
    assert normalise("email", "anne.hill") is None
    assert normalise("person_name", "   ") is None


def test_types_are_inferred_from_names_then_values() -> None:
    records = [
        {
            "given_name": "anne",
            "surname": "hill",
            "dob": "2000-10-23",
            "contact": "0405 771 490",
            "mail": "a@b.com",
            "ssn": "883-58-1631",
            "street": "179 Lake Road",
            "postcode": "2600",
            "suburb": "kingston",
            "state": "act",
            "name": "Acme Widgets Inc",
            "notes": "moved from the old house near the river last spring",
            "joined": "23/10/2000",
        }
    ] * 10
    kinds = infer_field_types(records, list(records[0]))
    assert kinds == {
        "given_name": "person_name",
        "surname": "person_name",
        "dob": "date",
        "contact": "phone",
        "mail": "email",
        "ssn": "identifier",
        "street": "address",
        "postcode": "postcode",
        "suburb": "place",
        "state": "category",
        "name": "org_name",
        "notes": "text",
        "joined": "date",
    }


def test_typed_fields_count_unreadable_and_truncated_values() -> None:
    from er.featurize import FieldTypes

    types = FieldTypes({"dob": "date", "phone": "phone", "coauthors": "text"}, max_chars=45)
    batch = types.normalise(
        [
            {"dob": "31/02/2000", "phone": "1" * 40, "coauthors": "a" * 50},
            {"dob": "2000-10-23", "phone": "", "coauthors": "b, c"},
            {"dob": None},
        ]
    )
    assert batch.rows == [[None, None, "a" * 45], ["20001023", None, "b c"], [None, None, None]]
    assert batch.notes() == {"unreadable": {"dob": 1, "phone": 1}, "truncated": {"coauthors": 1}}


def test_given_types_override_inferred_ones() -> None:
    from er.exceptions import ConfigError
    from er.featurize import FieldTypes

    recs = [{"code": "2600", "when": "2000-10-23"}] * 5
    types = FieldTypes.infer(recs, ["code", "when"], given={"code": "postcode"})
    assert types.to_json() == {"code": "postcode", "when": "date"}
    with pytest.raises(ConfigError, match="'nope' is not"):
        FieldTypes({"x": "nope"})


MARKERS = ["NULL", "null", " NaN ", "nan", "N/A", "n/a", "#N/A", "(null)", "NA"]


@pytest.mark.parametrize("kind", sorted(NORMALISERS))
def test_a_marker_of_no_value_is_no_value(kind: str) -> None:
    """Every two records holding "NULL" would otherwise agree on it exactly."""
    assert [normalise(kind, m) for m in MARKERS] == [None] * len(MARKERS)
    assert normalise(kind, float("nan")) is None


def test_names_that_look_like_markers_stay_names() -> None:
    assert [normalise("person_name", v) for v in ["Nan", "Na", "na", "NAN"]] == [
        "nan",
        "na",
        "na",
        None,  # capitals: pandas' NaN upper-cased, not a name to keep
    ]
    assert normalise("text", "NONE") == "none"  # a list with nothing in it is a value


def test_markers_neither_type_a_field_nor_count_as_unreadable() -> None:
    """A phone column half "N/A" is a phone (it was free text), and its markers are
    missing values, not values the normaliser could not read."""
    from er.featurize import FieldTypes, infer_field_types

    recs = [{"phone": "N/A" if i % 2 else f"04{10_000_000 + 7_919 * i}"} for i in range(400)]
    assert infer_field_types(recs, ["phone"]) == {"phone": "phone"}
    out = FieldTypes({"phone": "phone"}).normalise(recs)
    assert out.rows[1] == [None] and not out.unreadable
