"""Reading record files (JSON Lines, a JSON array, CSV or TSV) into batches, without
losing a bad line.

A CSV file is read as spreadsheets and data frames write it: its separator read from
its first lines, a byte-order mark dropped, Windows' Western code page when it is not
UTF-8, a blank header named ``Unnamed: N`` and a repeated one numbered. A line that
cannot be read (invalid UTF-8, malformed JSON, a non-finite number, a CSV row with too
many cells) becomes a reject naming the file, the line and what is wrong; every other
line is a record for the pipeline to validate.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from er.exceptions import ERError

__all__ = ["Chunk", "read_chunks"]

logger = logging.getLogger(__name__)


@dataclass
class Chunk:
    """Up to ``batch_size`` records of a file, and the lines of that stretch that failed."""

    records: list[Any] = field(default_factory=list)
    rejects: list[dict[str, Any]] = field(default_factory=list)
    where: list[str] = field(default_factory=list)  # "file line N" of each record

    def __len__(self) -> int:
        return len(self.records) + len(self.rejects)


class _NonFinite(ValueError):
    pass


def _no_constants(name: str) -> float:
    raise _NonFinite(f"non-finite number {name}")


def _jsonl_lines(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """(line number, record or None, reason or None) of each non-blank line."""
    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8").removeprefix("\ufeff")  # a byte-order mark
            except UnicodeDecodeError as exc:
                yield number, None, f"not valid UTF-8 at byte {exc.start}"
                continue
            try:
                yield number, json.loads(text, parse_constant=_no_constants), None
            except _NonFinite as exc:
                yield number, None, str(exc)
            except ValueError as exc:  # JSONDecodeError is a ValueError
                yield number, None, f"malformed JSON ({str(exc).splitlines()[0]})"


# Cell separators a CSV file may use: a spreadsheet's export is comma-separated, or
# semicolon-separated where the comma is the decimal mark, or tab-separated.
DELIMITERS = (",", ";", "\t", "|")


# UTF-8's sequences of two to four bytes: a file whose bytes above 127 are mostly in
# them is UTF-8 (a bad byte then rejects its record); one whose are mostly not was
# written in a one-byte code page, Windows' Western one by default (where a pair such
# as "É®" reads as one UTF-8 sequence by chance).
_UTF8_SEQUENCE = re.compile(
    rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}"
)
_HIGH_BYTES = bytes(range(128, 256))
LEGACY_ENCODING = "cp1252"


def _decoded(path: Path, data: bytes, encoding: str | None) -> str:
    """A CSV file's text: in ``encoding`` if given, else UTF-8, else (most bytes above
    127 outside UTF-8 sequences) :data:`LEGACY_ENCODING`, said once in the log.
    Bytes that do not decode reach the validator, which rejects their records."""
    if encoding is not None:
        try:
            return data.decode(encoding, errors="surrogateescape")
        except LookupError:
            raise ERError(f"--encoding {encoding!r}: no such encoding.") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    high = len(data) - len(data.translate(None, _HIGH_BYTES))
    in_sequences = sum(len(m) for m in _UTF8_SEQUENCE.findall(data))
    if in_sequences > high / 2:  # mostly UTF-8: a stray byte rejects its record
        return data.decode("utf-8", errors="surrogateescape")
    logger.warning(
        "%s: not UTF-8; read as %s (Windows' Western code page); pass --encoding to "
        "choose another.",
        path.name,
        LEGACY_ENCODING,
    )
    return data.decode(LEGACY_ENCODING, errors="surrogateescape")


def _distinct_names(names: list[str]) -> list[str]:
    """A header's names, a repeated one numbered from its second time (``name``,
    ``name.1``, as a data frame reads it), so that no column overwrites another."""
    out: list[str] = []
    for name in names:
        unique, count = name, 0
        while unique in out:
            count += 1
            unique = f"{name}.{count}"
        out.append(unique)
    return out


SNIFF_LINES = 20  # lines a CSV file's separator is read from


def _delimiter(text: str) -> str:
    """The separator that splits the first lines of ``text`` (any line ends) into one
    number of cells, the most (a quoted ``"a,b"`` in a header of semicolons is one
    cell); a comma when none splits them alike."""
    lines = [line for line in re.split(r"\r\n|\r|\n", text, maxsplit=SNIFF_LINES) if line]
    lines = lines[:SNIFF_LINES]

    def fit(d: str) -> tuple[bool, int, bool]:
        counts = {len(cells) for cells in csv.reader(lines, delimiter=d)}
        return len(counts) == 1 and min(counts) > 1, max(counts, default=0), d == ","

    return max(DELIMITERS, key=fit)


def _starts_an_array(path: Path) -> bool:
    """Whether a JSON file holds one array (``df.to_json(orient="records")``), not one
    object per line: its first character that is not white space is ``[``."""
    with path.open("rb") as f:
        head = f.read(4096).lstrip(b" \t\r\n\xef\xbb\xbf")
    return head.startswith(b"[")


def _json_array_items(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """(position from 1, record, None) of each element of a file holding one JSON array;
    an array that does not parse is one error (no element can be told from another)."""
    try:
        items = json.loads(path.read_bytes().decode("utf-8-sig"), parse_constant=_no_constants)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise ERError(
            f"{path}: not a JSON array of records ({str(exc).splitlines()[0]})."
        ) from None
    for number, item in enumerate(items, start=1):
        yield number, item, None


def _csv_lines(
    path: Path, id_field: str | None, delimiter: str | None = None, encoding: str | None = None
) -> Iterator[tuple[int, Any, str | None]]:
    with path.open("rb") as f:
        data = f.read()
    # a spreadsheet's "CSV UTF-8" starts with a byte-order mark, not part of the header
    text = _decoded(path, data, encoding).removeprefix("\ufeff")
    delimiter = delimiter or _delimiter(text)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, skipinitialspace=True)
    header = next(reader, None)
    if not header:
        raise ERError(f"{path}: empty CSV file (no header line).")
    names = _distinct_names([h.strip() or f"Unnamed: {i}" for i, h in enumerate(header)])
    if id_field is not None and id_field not in names:
        close = difflib.get_close_matches(id_field, names, n=1, cutoff=0.6)
        hint = f" (did you mean --id-field {close[0]!r}?)" if close else ""
        raise ERError(
            f"{path}: no column {id_field!r} in the header ({', '.join(map(repr, names))}); "
            f"name the id column with --id-field{hint}."
        )
    for row in reader:
        number = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(names):
            yield number, None, f"has {len(row)} cells, the header {len(names)}"
            continue
        yield number, {k: v.strip() for k, v in zip(names, row, strict=True)}, None


def read_chunks(
    path: Path,
    batch_size: int,
    fmt: str | None = None,
    id_field: str | None = None,
    encoding: str | None = None,
) -> Iterator[Chunk]:
    """Batches of records from a ``.jsonl``/``.ndjson``/``.json`` file (one object per line,
    or one array of them), a ``.csv`` or a ``.tsv`` file (a CSV
    file's separator is read from its header: :data:`DELIMITERS`; a TSV's is a tab; its
    encoding is UTF-8 unless given or plainly a one-byte code page: :func:`_decoded`).

    Raises
    ------
    ERError
        If the file is missing, its format cannot be told, or a CSV header lacks
        ``id_field`` (one line, exit 2, before any record is read).
    """
    if batch_size < 1:
        raise ERError(f"--batch-size must be >= 1. Got {batch_size}.")
    if not path.is_file():
        raise ERError(f"{path}: no such file (records).")
    suffixes = {
        ".jsonl": "jsonl",
        ".ndjson": "jsonl",
        ".json": "jsonl",
        ".csv": "csv",
        ".tsv": "tsv",
    }
    fmt = fmt or suffixes.get(path.suffix.lower())
    if fmt not in ("jsonl", "csv", "tsv"):
        raise ERError(
            f"{path}: cannot tell the format; name it .jsonl, .json, .csv or .tsv, or "
            "pass --format."
        )
    unit = "line"
    if fmt == "jsonl" and path.suffix.lower() == ".json" and _starts_an_array(path):
        lines, unit = _json_array_items(path), "record"
    elif fmt == "jsonl":
        lines = _jsonl_lines(path)
    else:
        lines = _csv_lines(path, id_field, "\t" if fmt == "tsv" else None, encoding)
    chunk = Chunk()
    for number, record, reason in lines:
        if reason is not None:
            chunk.rejects.append(
                {
                    "external_id": None,
                    "payload": None,
                    "reason": f"{path.name} {unit} {number}: {reason}",
                }
            )
        else:
            chunk.records.append(record)
            chunk.where.append(f"{path.name} {unit} {number}")
        if len(chunk) >= batch_size:
            yield chunk
            chunk = Chunk()
    if len(chunk):
        yield chunk
