"""A batch's features, made where the batch is ingested (DESIGN §4, issue #56).

What a batch's records become before they meet the collection's state (their typed
values normalised, their vectors, their blocking keys) is a function of the records and
the collection's config alone. The writer holds the collection's lock and is its one
process per collection, so whatever it need not do, it should not: an ingest process,
on any machine, makes the batch's features and stores them beside the batch
(``batch_features``); the writer reads them instead of making them again, and makes
them itself where they are missing or were made under another config.

Both paths run :func:`make_features`, so the writer's result is the same either way,
and a replay after a crash, which may find the stored features gone, computes what the
first run read. The stored form is ``.npy`` arrays and JSON in one ``.npz``, loaded
with ``allow_pickle=False``: nothing in the database runs as code.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from er.ann import record_keys, text_keys
from er.exceptions import ERError
from er.pipeline.config import _featurizer, field_types

logger = logging.getLogger(__name__)

# Bump when what make_features computes changes: stored features of another format are
# made again by the writer, never read.
FEATURES_FORMAT = 1

# The config entries make_features reads.
_INPUTS = ("featurizer", "scoring", "field_types", "candidates")


@dataclass
class BatchFeatures:
    """The features of a batch's records, in the batch's order.

    Attributes
    ----------
    externals : list of str, length b
        The records' external ids (the order the arrays follow).
    X : ndarray of float32, shape (b, dim)
        The featurizer's vectors (of the normalised values, where fields are typed).
    rows : list of list of (str or None), shape (b, n_fields), or None
        Normalised values in field order (typed fields); None for a cosine collection.
    keys : ndarray of int64, shape (b, n_keys), or None
        Blocking keys (``candidates`` ``keys`` or ``words``), 0 padded; else None.
    notes : dict
        Values not read as their type or cut to length, per field (the batch's notes).
    """

    externals: list[str]
    X: NDArray[np.float32]
    rows: list[list[str | None]] | None = None
    keys: NDArray[np.int64] | None = None
    notes: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.externals)

    def take(self, order: Sequence[int]) -> BatchFeatures:
        """The features of the records at positions ``order``, in that order."""
        at = np.asarray(order, np.int64)
        return BatchFeatures(
            [self.externals[i] for i in order],
            self.X[at],
            None if self.rows is None else [self.rows[i] for i in order],
            None if self.keys is None else self.keys[at],
            self.notes,
        )


def features_digest(config: Mapping[str, Any]) -> str:
    """sha256 of what :func:`make_features` reads of ``config`` and the format: stored
    features are read only under the digest they were made with."""
    used = {key: config.get(key) for key in _INPUTS}
    # the fields' order is the rows' order: a JSON column may hand them back reordered
    # (PostgreSQL's jsonb sorts keys), so it is part of the digest
    types = used["field_types"]
    used["field_types"] = list(types.items()) if isinstance(types, Mapping) else types
    text = json.dumps({"format": FEATURES_FORMAT, **used}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def make_features(config: Mapping[str, Any], rows: Sequence[tuple[str, Any]]) -> BatchFeatures:
    """Normalise, featurize and key a batch (the writer's search stage, issue #29).

    Parameters
    ----------
    config : mapping
        The collection's config.
    rows : sequence of (str, dict), length b
        ``(external id, payload)`` of the batch's records, in order.
    """
    payloads = [payload for _, payload in rows]
    externals = [ext for ext, _ in rows]
    types = field_types(config)
    if types is None:
        return BatchFeatures(externals, _featurizer(config)(payloads))
    batch = types.normalise(payloads)
    records = [dict(zip(types.names, r, strict=True)) for r in batch.rows]
    X = _featurizer(config)(records)
    keys = None
    if config.get("candidates") in ("keys", "words"):
        keyer = text_keys if config["candidates"] == "words" else record_keys
        keys = keyer(batch.rows, types.kinds)
    return BatchFeatures(externals, X, batch.rows, keys, batch.notes())


def encode_features(features: BatchFeatures) -> bytes:
    """The stored form: an ``.npz`` of the arrays and of the JSON of the rest, deflated.
    The vectors are stored by their nonzero entries (about 130 of 1,024 for a person: a
    dense batch of 1,000 took 4.6 MB, and the database's time to store it cost more than
    the writer saved), exactly: the values are the float32s themselves."""
    doc = {
        "externals": features.externals,
        "rows": features.rows,
        "notes": features.notes,
        "keyed": features.keys is not None,
        "dim": int(features.X.shape[1]),
    }
    keys = features.keys if features.keys is not None else np.zeros((len(features), 0), np.int64)
    X = np.ascontiguousarray(features.X, np.float32)
    row, col = np.nonzero((X != 0) | np.signbit(X))  # -0.0 kept as it is
    text = np.frombuffer(json.dumps(doc).encode(), np.uint8)
    out = io.BytesIO()
    np.savez(
        out,
        count=np.bincount(row, minlength=X.shape[0]).astype(np.int32),
        col=col.astype(np.int32 if X.shape[1] > 32767 else np.int16),
        value=X[row, col],
        keys=keys,
        doc=text,
    )
    return zlib.compress(out.getvalue(), 1)


def decode_features(data: bytes) -> BatchFeatures:
    """What :func:`encode_features` stored; ERError if it is not that."""
    try:
        with np.load(io.BytesIO(zlib.decompress(data)), allow_pickle=False) as npz:
            doc = json.loads(npz["doc"].tobytes().decode())
            externals = [str(e) for e in doc["externals"]]
            X = np.zeros((len(externals), int(doc["dim"])), np.float32)
            row = np.repeat(np.arange(len(externals)), npz["count"])
            X[row, npz["col"]] = npz["value"]
            keys = np.asarray(npz["keys"], np.int64) if doc["keyed"] else None
    except (
        ValueError,
        KeyError,
        IndexError,
        OSError,
        EOFError,
        zipfile.BadZipFile,
        zlib.error,
    ) as exc:
        raise ERError(f"stored batch features unreadable: {exc}") from None
    if keys is not None and keys.shape[0] != len(externals):
        raise ERError("stored batch features unreadable: keys and ids differ in length")
    return BatchFeatures(externals, X, doc["rows"], keys, dict(doc["notes"]))


def usable(stored: Mapping[int, tuple[str, bytes]], digest: str) -> dict[int, BatchFeatures]:
    """Batch id -> the stored features made under ``digest`` that can be read; the rest
    are left out, for the writer to make again (never a batch failed for good: a retry
    would read the same bytes)."""
    out: dict[int, BatchFeatures] = {}
    for batch_id, (made_under, data) in stored.items():
        if made_under == digest:
            try:
                out[batch_id] = decode_features(data)
            except ERError as exc:
                logger.warning("batch %d: stored features not read: %r", batch_id, exc)
    return out


def aligned(features: BatchFeatures, externals: Sequence[str]) -> BatchFeatures | None:
    """``features`` in the order of ``externals``; None unless they hold exactly those."""
    if features.externals == list(externals):
        return features
    where = {ext: i for i, ext in enumerate(features.externals)}
    if len(where) != len(externals) or any(ext not in where for ext in externals):
        return None
    return features.take([where[ext] for ext in externals])


def joined(parts: Sequence[BatchFeatures]) -> BatchFeatures:
    """The features of consecutive batches as one step's (their notes summed)."""
    if len(parts) == 1:
        return parts[0]
    notes: dict[str, dict[str, int]] = {}
    for part in parts:
        for kind, counts in part.notes.items():
            into = notes.setdefault(kind, {})
            for name, n in counts.items():
                into[name] = into.get(name, 0) + int(n)
    rows = None if parts[0].rows is None else [r for p in parts for r in (p.rows or [])]
    keys = None if parts[0].keys is None else np.concatenate([p.keys for p in parts])
    return BatchFeatures(
        [e for p in parts for e in p.externals],
        np.concatenate([p.X for p in parts]),
        rows,
        keys,
        notes,
    )
