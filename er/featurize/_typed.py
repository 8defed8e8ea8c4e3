"""A collection's typed fields: records -> normalised values, and what could not be read.

The types are inferred from the first batch (:func:`infer_field_types`), shown by
``er ingest``, stored in the collection's config (``"field_types"``) and overridable
there; from then on they are fixed, so a replayed batch normalises exactly as before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from er.exceptions import ConfigError
from er.featurize._normalize import missing, normalise
from er.featurize._types import FIELD_TYPES, infer_field_types

__all__ = ["FieldTypes", "NormalisedBatch"]


@dataclass
class NormalisedBatch:
    """A batch's normalised values and its counts of values that were not usable.

    Attributes
    ----------
    rows : list of list of (str or None), shape (b, n_fields)
        Normalised values in field order; None where the record has no usable value.
    unreadable : Counter
        Field -> values present but not readable as the field's type (an impossible
        date, a 40-digit phone): the record is resolved on its other fields.
    truncated : Counter
        Field -> values longer than the limit, cut to it before normalising.
    """

    rows: list[list[str | None]]
    unreadable: Counter[str] = field(default_factory=Counter)
    truncated: Counter[str] = field(default_factory=Counter)

    def notes(self) -> dict[str, dict[str, int]]:
        """The counts as JSON (empty counters left out), for the batch's row."""
        out = {"unreadable": dict(self.unreadable), "truncated": dict(self.truncated)}
        return {k: v for k, v in out.items() if v}


@dataclass(frozen=True)
class FieldTypes:
    """Ordered field -> type of a collection.

    Parameters
    ----------
    types : mapping of str to str
        Field name -> one of :data:`er.featurize.FIELD_TYPES`.
    max_chars : int
        Longer values are cut to this many characters before normalising.
    """

    types: Mapping[str, str]
    max_chars: int = 1000

    def __post_init__(self) -> None:
        for name, kind in self.types.items():
            if kind not in FIELD_TYPES:
                raise ConfigError(
                    f"field_types: field {name!r}: {kind!r} is not a type; "
                    f"known types {FIELD_TYPES}."
                )

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.types)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(self.types.values())

    @classmethod
    def infer(
        cls,
        records: Iterable[Mapping[str, Any]],
        fields: Sequence[str],
        given: Mapping[str, str] | None = None,
        max_chars: int = 1000,
    ) -> FieldTypes:
        """Types inferred from ``records``, except those ``given`` by the user."""
        given = dict(given or {})
        unknown = set(given) - set(fields)
        if unknown:
            raise ConfigError(
                f"field_types: {sorted(unknown)} are not featurized fields ({list(fields)})."
            )
        inferred = infer_field_types(records, [f for f in fields if f not in given])
        return cls({f: given.get(f) or inferred[f] for f in fields}, max_chars=max_chars)

    def normalise(self, records: Sequence[Mapping[str, Any]]) -> NormalisedBatch:
        """Normalise every record's typed fields.

        Parameters
        ----------
        records : sequence of mapping, length b
        """
        out = NormalisedBatch(rows=[])
        items = list(self.types.items())
        for rec in records:
            row: list[str | None] = []
            for name, kind in items:
                value = rec.get(name)
                if isinstance(value, str) and len(value) > self.max_chars:
                    value = value[: self.max_chars]
                    out.truncated[name] += 1
                norm = normalise(kind, value)
                if norm is None and not missing(value):
                    out.unreadable[name] += 1
                row.append(norm)
            out.rows.append(row)
        return out

    def to_json(self) -> dict[str, str]:
        return dict(self.types)
