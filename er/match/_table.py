"""The normalised field values of a growing set of records, as integer codes.

Comparisons and term frequencies work on codes: equality is an integer compare, and
a string is looked at only when two codes differ. Codes are given in arrival order,
so the same records in the same order get the same codes (replays are exact).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["FieldTable"]


class FieldTable:
    """Codes of each record's normalised value per field (-1: no value).

    Parameters
    ----------
    fields : sequence of str
        Field names, in the pair model's order.
    """

    def __init__(self, fields: Sequence[str]) -> None:
        self.fields = tuple(fields)
        self.vocab: list[list[str]] = [[] for _ in self.fields]
        self._index: list[dict[str, int]] = [{} for _ in self.fields]
        self._codes = np.zeros((0, len(self.fields)), np.int32)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the values and the codes in use: the value -> code maps are rebuilt
        from the values on load. They took more than half of the table's pickling
        time (0.38 of 0.67 s at 300k people), paid at every checkpoint."""
        state = self.__dict__.copy()
        state["_index"], state["_codes"] = None, self.codes.copy()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self._index is None:
            self._index = [{v: c for c, v in enumerate(vocab)} for vocab in self.vocab]

    @property
    def codes(self) -> NDArray[np.int32]:
        """(n, n_fields) codes of every record so far (a view)."""
        return self._codes[: self._n]

    def add(self, rows: Sequence[Sequence[str | None]]) -> None:
        """Append records given as normalised values in field order.

        Parameters
        ----------
        rows : sequence of sequence of (str or None), shape (b, n_fields)
        """
        new = np.full((len(rows), len(self.fields)), -1, np.int32)
        for f, (vocab, index) in enumerate(zip(self.vocab, self._index, strict=True)):
            for r, row in enumerate(rows):
                value = row[f]
                if value is None:
                    continue
                code = index.get(value)
                if code is None:
                    code = index[value] = len(vocab)
                    vocab.append(value)
                new[r, f] = code
        self._grow(new)

    def _grow(self, new: NDArray[np.int32]) -> None:
        n1 = self._n + new.shape[0]
        if n1 > self._codes.shape[0]:
            room = np.full((max(n1, 2 * self._codes.shape[0]), len(self.fields)), -1, np.int32)
            room[: self._n] = self._codes[: self._n]
            self._codes = room
        self._codes[self._n : n1] = new
        self._n = n1

    def values(self, row: int) -> dict[str, str | None]:
        """One record's normalised values by field name."""
        return {
            name: (self.vocab[f][c] if c >= 0 else None)
            for f, (name, c) in enumerate(zip(self.fields, self.codes[row], strict=True))
        }

    def frequencies(self, name: str) -> tuple[dict[str, float], float | None]:
        """Field ``name``'s value frequencies over the records that hold one: the values
        held twice or more, and the floor (one over those records; None: no value)."""
        f = self.fields.index(name)
        present = self.codes[:, f][self.codes[:, f] >= 0]
        if present.size == 0:
            return {}, None
        values, counts = np.unique(present, return_counts=True)
        n = float(present.size)
        held = zip(values.tolist(), counts.tolist(), strict=True)
        return {self.vocab[f][v]: c / n for v, c in held if c >= 2}, 1.0 / n
