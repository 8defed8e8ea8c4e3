"""Reading record files: CSV as spreadsheets write it, against the records written."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from er.exceptions import ERError
from er.records import DELIMITERS, read_chunks

HEADER = st.lists(
    # a name may hold another separator or a space: "last, first", "a;b"
    st.text("abcdefghijklmnopqrstuvwxyz_ ,;|", min_size=1, max_size=8).map(str.strip).filter(bool),
    min_size=2,
    max_size=6,
    unique=True,
)
# cells as users have them: separators, quotes, accents, inner spaces; no outer space
# (a cell is read stripped) and no line breaks
CELL = st.text(st.sampled_from(list("abc xyz,;|\t\"'éß0129-./")), max_size=12).map(str.strip)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    names=HEADER,
    rows=st.lists(st.lists(CELL, min_size=6, max_size=6), min_size=2, max_size=30),
    delimiter=st.sampled_from(DELIMITERS),
    encoding=st.sampled_from(["utf-8", "utf-8-sig", "cp1252"]),
    newline=st.sampled_from(["\n", "\r\n"]),
    batch=st.integers(1, 7),
)
def test_a_csv_reads_back_as_written(
    tmp_path: Path,
    names: list[str],
    rows: list[list[str]],
    delimiter: str,
    encoding: str,
    newline: str,
    batch: int,
) -> None:
    """Whatever the separator, the encoding (UTF-8 with or without a byte-order mark, or
    Windows' Western code page, told apart unasked) or the line ends, every record
    comes back with the cells the writer was given (Python's csv module and codecs are
    the oracle)."""
    records = [{"id": f"r{i}", **dict(zip(names, row, strict=False))} for i, row in enumerate(rows)]
    out = io.StringIO()
    writer = csv.DictWriter(out, ["id", *names], delimiter=delimiter, lineterminator=newline)
    writer.writeheader()
    writer.writerows(records)
    path = tmp_path / "records.csv"
    path.write_text(out.getvalue(), encoding=encoding, newline="")
    chunks = list(read_chunks(path, batch, id_field="id"))
    assert [r for c in chunks for r in c.records] == records
    assert all(not c.rejects for c in chunks)
    assert all(len(c) <= batch for c in chunks)


def test_a_header_without_the_id_column_is_one_error_before_any_record(tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_text("record_id;name\nr1;ann\n", encoding="utf-8")
    with pytest.raises(
        ERError, match=r"people.csv: no column 'id' in the header \('record_id', 'name'\)"
    ):
        next(read_chunks(path, 10, id_field="id"))
    assert next(read_chunks(path, 10, id_field="record_id")).records == [
        {"record_id": "r1", "name": "ann"}
    ]


def test_a_tsv_file_is_read_as_tab_separated(tmp_path: Path) -> None:
    path = tmp_path / "people.tsv"
    path.write_text("id\tname, full\nr1\tlee, ann\n", encoding="utf-8")
    assert next(read_chunks(path, 10)).records == [{"id": "r1", "name, full": "lee, ann"}]


def test_a_bad_byte_in_a_utf8_file_rejects_its_record_alone(tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_bytes(b"id,name\nr1,zo\xc3\xab\nr2,ren\xe9\nr3,m\xc3\xbcller\n")
    chunk = next(read_chunks(path, 10))
    assert chunk.records[0] == {"id": "r1", "name": "zoë"}
    assert chunk.records[2] == {"id": "r3", "name": "müller"}
    assert "\udce9" in chunk.records[1]["name"]  # the validator rejects it, naming the field


def test_an_encoding_given_is_used_and_an_unknown_one_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_text("id,name\nr1,łódź\n", encoding="iso-8859-2")
    chunk = next(read_chunks(path, 10, encoding="iso-8859-2"))
    assert chunk.records == [{"id": "r1", "name": "łódź"}]
    with pytest.raises(ERError, match="--encoding 'klingon': no such encoding"):
        next(read_chunks(path, 10, encoding="klingon"))


def test_a_repeated_header_keeps_every_column(tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_text("id,name,name,name.1,name\nr1,ann,lee,york,x\n", encoding="utf-8")
    assert next(read_chunks(path, 10)).records == [
        {"id": "r1", "name": "ann", "name.1": "lee", "name.1.1": "york", "name.2": "x"}
    ]


@pytest.mark.parametrize("indent", [None, 2])
def test_a_json_array_reads_as_its_records(tmp_path: Path, indent: int | None) -> None:
    """``df.to_json(orient="records")``: one array, on one line or many."""
    records = [{"id": f"r{i}", "name": "zoë", "n": i} for i in range(7)]
    path = tmp_path / "people.json"
    path.write_text(json.dumps(records, indent=indent, ensure_ascii=False), encoding="utf-8")
    chunks = list(read_chunks(path, 3))
    assert [r for c in chunks for r in c.records] == records
    assert chunks[1].where == [
        "people.json record 4",
        "people.json record 5",
        "people.json record 6",
    ]


def test_a_broken_json_array_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "people.json"
    path.write_text('[{"id": "r1"}, {"id": ', encoding="utf-8")
    with pytest.raises(ERError, match=r"people\.json: not a JSON array of records"):
        next(read_chunks(path, 10))


def test_json_lines_with_a_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "people.jsonl"
    path.write_text('{"id": "r1"}\n{"id": "r2"}\n', encoding="utf-8-sig")
    assert next(read_chunks(path, 10)).records == [{"id": "r1"}, {"id": "r2"}]


def test_a_missing_id_column_names_the_likeliest_one(tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_text("Record_ID,name\nr1,ann\n", encoding="utf-8")
    with pytest.raises(ERError, match=r"did you mean --id-field 'Record_ID'\?"):
        next(read_chunks(path, 10, id_field="record_id"))


def test_line_ends_of_a_classic_mac_are_lines(tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_bytes(b"id;name\rr1;ann\rr2;bob\r")
    assert next(read_chunks(path, 10)).records == [
        {"id": "r1", "name": "ann"},
        {"id": "r2", "name": "bob"},
    ]


def test_a_quoted_separator_in_the_header_does_not_decide(tmp_path: Path) -> None:
    """A header of semicolons with a quoted name holding commas: the separator is the
    one that splits every first line alike."""
    path = tmp_path / "people.csv"
    path.write_text('id;"a,b,c,d";e\nr1;x;y\nr2;"p,q";z\n', encoding="utf-8")
    assert next(read_chunks(path, 10)).records == [
        {"id": "r1", "a,b,c,d": "x", "e": "y"},
        {"id": "r2", "a,b,c,d": "p,q", "e": "z"},
    ]


def test_a_code_page_file_with_a_utf8_looking_pair_is_read_whole(tmp_path: Path) -> None:
    """ "É®" in Windows-1252 is C9 AE, a valid UTF-8 pair: one such pair among the
    accents does not make the file UTF-8."""
    path = tmp_path / "people.csv"
    text = "id,name\nr1,Renée\nr2,Zoë\nr3,CAFÉ\nr4,ÉTÉ®\n"
    path.write_bytes(text.encode("cp1252"))
    names = [r["name"] for r in next(read_chunks(path, 10)).records]
    assert names == ["Renée", "Zoë", "CAFÉ", "ÉTÉ®"]


def test_columns_without_a_header_are_named_as_a_data_frame_names_them(tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_text(",id,,name\n0,r1,a,ann\n", encoding="utf-8")
    assert next(read_chunks(path, 10)).records == [
        {"Unnamed: 0": "0", "id": "r1", "Unnamed: 2": "a", "name": "ann"}
    ]
