"""Featurizer configuration: which fields, how each is encoded, weights, dimension.

A collection's config is plain JSON (stored in ``collections.config["featurizer"]``)
so that a replayed batch is featurized exactly as before: nothing here depends on
statistics of the data seen so far.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from er.exceptions import ConfigError
from er.featurize._normalize import missing
from er.featurize._types import header_words

__all__ = [
    "DEFAULT_DIM",
    "ENCODERS",
    "FeaturizerConfig",
    "FieldSpec",
    "infer_config",
    "left_out_fields",
]

ENCODERS = ("ngrams", "exact", "numeric")
# Signed-hash dimensions: the fewest that keep MBSCC's pairwise F1 flat over the cuts
# around the entity cut; fewer narrow that plateau, more cost time for little gain.
# Chosen on FEBRL3 (bench/RESULTS.md, "Featurizer dimension and entity cut (FEBRL)");
# 512, tried for speed, carried over worse to FEBRL2 and FEBRL4 (bench/HISTORY.md,
# 2026-11-22).
DEFAULT_DIM = 1024
MAX_FIELD_CHARS = 1000


@dataclass(frozen=True)
class FieldSpec:
    """How one record field becomes part of the vector.

    Parameters
    ----------
    name : str
        The record's key.
    encoder : {"ngrams", "exact", "numeric"}
        ``ngrams``: character n-grams of the lower-cased, space-collapsed text (names,
        addresses); ``exact``: the whole value as one token (ids, codes, dates);
        ``numeric``: the number on two offset grids of width ``scale``, so that close
        values share a token.
    weight : float
        Share of the field in the cosine similarity (the field's unit vector is
        scaled by sqrt(weight) before the fields are added).
    n : tuple of int
        n-gram sizes (``ngrams`` only).
    scale : float
        Grid width (``numeric`` only).
    """

    name: str
    encoder: str = "ngrams"
    weight: float = 1.0
    n: tuple[int, ...] = (2, 3)
    scale: float = 1.0

    def __post_init__(self) -> None:
        where = f"featurizer field {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"featurizer: a field needs a non-empty name. Got {self.name!r}.")
        if self.encoder not in ENCODERS:
            raise ConfigError(f"{where}: encoder must be one of {ENCODERS}. Got {self.encoder!r}.")
        if not (isinstance(self.weight, int | float) and math.isfinite(self.weight)) or (
            self.weight <= 0
        ):
            raise ConfigError(f"{where}: weight must be a number > 0. Got {self.weight!r}.")
        if not self.n or any(not isinstance(k, int) or not 1 <= k <= 8 for k in self.n):
            raise ConfigError(f"{where}: n must list n-gram sizes from 1 to 8. Got {self.n!r}.")
        if not (isinstance(self.scale, int | float) and self.scale > 0):
            raise ConfigError(f"{where}: scale must be > 0. Got {self.scale!r}.")


@dataclass(frozen=True)
class FeaturizerConfig:
    """The whole featurizer of a collection.

    Parameters
    ----------
    fields : tuple of FieldSpec
        Encoded fields (empty when ``vector_field`` is set).
    dim : int
        Output dimension (signed feature hashing into this many columns).
    vector_field : str or None
        Name of a field that carries a precomputed embedding, passed through
        (normalised) instead of encoding fields; its length must equal ``dim``.
    max_field_chars : int
        Characters of a text value the featurizer reads (a longer value is accepted
        and cut; the pipeline counts such values per batch).
    """

    fields: tuple[FieldSpec, ...] = ()
    dim: int = DEFAULT_DIM
    vector_field: str | None = None
    max_field_chars: int = MAX_FIELD_CHARS
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.dim, int) or not 2 <= self.dim <= 65536:
            raise ConfigError(f"featurizer: dim must be an int in [2, 65536]. Got {self.dim!r}.")
        if not self.fields and self.vector_field is None:
            raise ConfigError("featurizer: name at least one field, or a vector_field.")
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ConfigError(f"featurizer: a field is listed twice in {names}.")

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> FeaturizerConfig:
        """Build from the JSON form (:meth:`to_json`); one clear line for each mistake."""
        if not isinstance(doc, Mapping):
            raise ConfigError(f"featurizer config must be a JSON object. Got {type(doc).__name__}.")
        unknown = set(doc) - {"fields", "dim", "vector_field", "max_field_chars"}
        if unknown:
            raise ConfigError(f"featurizer config: unknown key(s) {sorted(unknown)}.")
        specs = []
        for item in doc.get("fields", []):
            if isinstance(item, str):
                item = {"name": item}
            if not isinstance(item, Mapping):
                raise ConfigError(f"featurizer: each field is a name or an object. Got {item!r}.")
            bad = set(item) - {"name", "encoder", "weight", "n", "scale"}
            if bad:
                raise ConfigError(f"featurizer field {item.get('name')!r}: unknown {sorted(bad)}.")
            kw = dict(item)
            if "n" in kw:
                kw["n"] = tuple(kw["n"]) if isinstance(kw["n"], list) else (kw["n"],)
            specs.append(FieldSpec(**kw))
        return cls(
            fields=tuple(specs),
            dim=doc.get("dim", DEFAULT_DIM),
            vector_field=doc.get("vector_field"),
            max_field_chars=doc.get("max_field_chars", MAX_FIELD_CHARS),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON form stored with the collection."""
        out = asdict(self)
        out.pop("extra")
        out["fields"] = [{**f, "n": list(f["n"])} for f in out["fields"]]
        return out


def infer_config(
    records: Iterable[Mapping[str, Any]],
    *,
    id_field: str,
    gold_field: str | None = None,
    dim: int = DEFAULT_DIM,
) -> FeaturizerConfig:
    """A default featurizer from the first batch: every text field as n-grams, weight 1.

    The id and gold fields are left out, and so are a field without a name and one that
    numbers the rows (:func:`row_numbers`). A ``vector`` field holding a list of numbers
    makes the collection a precomputed-embedding one (its length becomes ``dim``).
    Numbers count as text (codes and dates in CSV files are numbers to a parser but
    identifiers to a person); a field whose values are mostly lists or objects is
    left out.
    """
    leave_out = {id_field, gold_field}
    kinds: dict[str, Counter[str]] = {}
    values: dict[str, list[str]] = {}
    vector_len = None
    for rec in records:
        for name, value in rec.items():
            if name in leave_out or not name.strip():  # a header's blank name: unnamed
                continue
            if name == "vector" and isinstance(value, list):
                vector_len = len(value)
                continue
            kind = _kind(value)
            kinds.setdefault(name, Counter())[kind] += 1
            if kind == "text":
                values.setdefault(name, []).append(str(value))
    if vector_len:
        return FeaturizerConfig(dim=vector_len, vector_field="vector")
    # a field is text when most of its values are (a bad record does not drop it)
    text = [
        n
        for n, k in kinds.items()
        if k["text"] > k["other"] and not row_numbers(n, values.get(n, []))
    ]
    if not text:
        raise ConfigError(
            "cannot infer a featurizer: the records have no text fields besides the id and "
            "gold fields and row numbers; pass --config with fields or a vector field."
        )
    return FeaturizerConfig(fields=tuple(FieldSpec(name=n) for n in text), dim=dim)


def _kind(value: Any) -> str:
    if missing(value):
        return "empty"
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return "text"
    return "other"


# A field that numbers the rows (a data frame's or a spreadsheet's index written with
# the records: "Unnamed: 0", "", "index", "row_no"; or any field of whole numbers, each
# record its own, that fill their range as a running count does) says where a record
# sits in its file, never who it is: its n-grams make neighbouring rows each other's
# candidates (hard people with one: 0.979 -> 0.746; bench/RESULTS.md, "Entity resolution
# quality on held-out sets (issue #53)").
_ROW_HEADER = re.compile(
    r"^(unnamed(_\d+)?|index|idx|row|rownum|row_?(id|no|num|number|index)|"
    r"line_?(no|num|number)|seq|sequence|record_?(no|num|number))?$"
)
ROW_NUMBERS_MIN = 50  # values a field needs before it is taken for row numbers
ROW_RANGE_FILL = 0.9  # share of [min, max] that distinct whole numbers fill as a count


def row_numbers(name: str, values: list[str]) -> bool:
    """Whether a field numbers the rows: at least :data:`ROW_NUMBERS_MIN` values, whole
    numbers, no two alike, and either a row index's header or filling their range."""
    if len(values) < ROW_NUMBERS_MIN:
        return False
    stripped = [v.strip() for v in values]
    if not all(v.isascii() and v.isdigit() and len(v) <= 12 for v in stripped):
        return False
    numbers = {int(v) for v in stripped}
    if len(numbers) < len(stripped):
        return False
    if _ROW_HEADER.match(header_words(name)):
        return True
    return len(numbers) >= ROW_RANGE_FILL * (max(numbers) - min(numbers) + 1)


def left_out_fields(
    records: Iterable[Mapping[str, Any]],
    featurizer: FeaturizerConfig,
    *,
    id_field: str,
    gold_field: str | None,
) -> list[str]:
    """The sample's fields a featurizer leaves out besides the id and gold fields (row
    numbers, lists and objects): what a new collection does not compare, for the user
    to see."""
    used = {f.name for f in featurizer.fields} | {id_field, gold_field, featurizer.vector_field}
    seen: dict[str, None] = {}
    for rec in records:
        seen.update(dict.fromkeys(n for n in rec if n not in used))
    return list(seen)
