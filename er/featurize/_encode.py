"""Records -> float32 unit vectors by signed feature hashing (deterministic, stateless).

Each field's tokens (character n-grams, one exact token, or numeric grid cells) are
hashed with CRC-32 salted by the field name into ``dim`` columns with a hash-derived
sign, so that collisions cancel in expectation (Weinberger et al., 2009). Each
field's vector is normalised and scaled by sqrt(weight); the sum is normalised. The
cosine of two records is then a weighted mix of their per-field n-gram cosines.
"""

from __future__ import annotations

import math
import unicodedata
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from er.featurize._config import FeaturizerConfig, FieldSpec
from er.featurize._normalize import missing

__all__ = ["featurize", "normalize_text"]

_GOLDEN = 0x9E3779B1  # Fibonacci hashing spreads CRC-32's low bits before the modulo
_CACHE_LIMIT = 500_000


def normalize_text(value: Any) -> str:
    """Lower-cased, NFKC-normalised, whitespace-collapsed text of a scalar value."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = unicodedata.normalize("NFKC", str(value)).lower()
    return " ".join(text.split())


class Featurizer:
    """Encodes records under one config; caches the columns of values it has seen.

    The cache only saves work: the output for a record never depends on which
    records were encoded before.
    """

    def __init__(self, config: FeaturizerConfig) -> None:
        self.config = config
        self._cache: dict[tuple[int, str], tuple[NDArray[np.int64], NDArray[np.float64]]] = {}

    def __call__(self, records: Sequence[Mapping[str, Any]]) -> NDArray[np.float32]:
        """Encode records.

        Parameters
        ----------
        records : sequence of mapping, length n
            Validated records (see :func:`er.featurize.validate_record`).

        Returns
        -------
        ndarray of float32, shape (n, dim)
            Unit rows.
        """
        cfg = self.config
        if cfg.vector_field is not None:
            V = np.array([r[cfg.vector_field] for r in records], dtype=np.float64)
            return _unit(V.reshape(len(records), cfg.dim))
        total = sparse.csr_matrix((len(records), cfg.dim))
        for k, spec in enumerate(cfg.fields):
            total = total + math.sqrt(spec.weight) * self._field_block(k, spec, records)
        return _unit(total.toarray())

    def field_similarities(
        self, a: Mapping[str, Any], b: Mapping[str, Any]
    ) -> dict[str, float | None]:
        """Cosine of two records field by field (None where either leaves it empty).

        The record cosine is the weight-mixed sum of these (module docstring), so
        they say which fields brought two records together (``er query explain``).
        """
        cfg = self.config
        if cfg.vector_field is not None:
            V = self([a, b])
            return {cfg.vector_field: round(float(V[0] @ V[1]), 6)}
        out: dict[str, float | None] = {}
        for k, spec in enumerate(cfg.fields):
            block = self._field_block(k, spec, [a, b])
            both = block.getnnz(axis=1).min() > 0
            out[spec.name] = round(float(block[0].multiply(block[1]).sum()), 6) if both else None
        return out

    def _field_block(
        self, k: int, spec: FieldSpec, records: Sequence[Mapping[str, Any]]
    ) -> sparse.csr_matrix:
        """(n, dim) sparse unit rows of one field (zero rows where it is empty)."""
        n, dim = len(records), self.config.dim
        rows, cols, signs = [], [], []
        for i, rec in enumerate(records):
            value = rec.get(spec.name)
            if missing(value):
                continue
            c, s = self._columns(k, spec, value)
            rows.append(i)
            cols.append(c)
            signs.append(s)
        if not rows:
            return sparse.csr_matrix((n, dim))
        counts = [c.size for c in cols]
        block = sparse.csr_matrix(
            (np.concatenate(signs), (np.repeat(rows, counts), np.concatenate(cols))),
            shape=(n, dim),
        )
        norms = np.sqrt(np.asarray(block.multiply(block).sum(axis=1)).ravel())
        norms[norms == 0] = 1.0  # colliding tokens that cancel exactly: the field adds nothing
        return sparse.diags(1.0 / norms) @ block

    def _columns(
        self, k: int, spec: FieldSpec, value: Any
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        text = normalize_text(value)[: self.config.max_field_chars]  # long values: their start
        key = (k, text)
        hit = self._cache.get(key)
        if hit is None:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            hit = self._cache[key] = _hash_tokens(spec.name, _tokens(spec, text), self.config.dim)
        return hit


def _tokens(spec: FieldSpec, text: str) -> list[str]:
    if spec.encoder == "exact":
        return [text]
    if spec.encoder == "numeric":
        try:
            x = float(text) / spec.scale
        except ValueError:
            return [text]  # not a number after all: still an exact token
        return [f"a{math.floor(x)}", f"b{math.floor(x + 0.5)}"]
    padded = f"^{text}$"
    return [padded[i : i + n] for n in spec.n for i in range(max(1, len(padded) - n + 1))]


def _hash_tokens(
    salt: str, tokens: list[str], dim: int
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Column and sign of each token, from CRC-32 of ``salt \\x1f token``."""
    prefix = salt.encode() + b"\x1f"
    h = np.array([zlib.crc32(prefix + t.encode()) for t in tokens], dtype=np.uint64)
    # uint64 times a Python int stays uint64 at run time (the stubs say signed)
    h = cast("NDArray[np.uint64]", (h * _GOLDEN) & 0xFFFFFFFF)
    cols = (h % dim).astype(np.int64)
    signs = np.where(h >> 31, 1.0, -1.0)
    return cols, signs


def _unit(X: NDArray[np.float64]) -> NDArray[np.float32]:
    norms: NDArray[np.float64] = np.linalg.norm(X, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (X / norms).astype(np.float32)


def featurize(
    records: Sequence[Mapping[str, Any]], config: FeaturizerConfig
) -> NDArray[np.float32]:
    """Encode records with a fresh :class:`Featurizer`; (n, dim) float32 unit rows."""
    return Featurizer(config)(records)
