"""Record validation against the collection's JSON Schema, plus what a schema cannot say.

A record that fails gets one reason naming the record and the field; the pipeline
stores it in ``rejected_records`` and goes on with the rest of the batch.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

import fastjsonschema
from jsonschema import Draft7Validator

from er.featurize._config import FeaturizerConfig

__all__ = ["RecordValidator", "record_schema"]

MAX_RECORD_BYTES = 64 * 1024


@cache
def _base_schema() -> dict[str, Any]:
    text = resources.files("er._schema").joinpath("records/record.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def record_schema(config: FeaturizerConfig, id_field: str) -> dict[str, Any]:
    """The JSON Schema (draft-07) of a collection's records.

    The id field is required; featurized fields are optional and scalar, of any length
    (the featurizer reads the first ``config.max_field_chars`` characters; the record as
    a whole is capped at 64 KiB); a vector field is an array of ``dim`` numbers.
    """
    schema = copy.deepcopy(_base_schema())
    defs = schema["definitions"]
    props: dict[str, Any] = {id_field: {"$ref": "#/definitions/id"}}
    for spec in config.fields:
        kind = "number" if spec.encoder == "numeric" else "text"
        props[spec.name] = {"$ref": f"#/definitions/{kind}"}
    required = [id_field]
    if config.vector_field is not None:
        # inline, not a $ref: draft-07 ignores keywords beside a $ref
        props[config.vector_field] = {
            **defs["vector"],
            "minItems": config.dim,
            "maxItems": config.dim,
        }
        required.append(config.vector_field)
    schema["properties"], schema["required"] = props, required
    return schema


class RecordValidator:
    """Checks records of one collection; ``reason(record)`` is None for a good one."""

    def __init__(self, config: FeaturizerConfig, id_field: str) -> None:
        self.config, self.id_field = config, id_field
        schema = record_schema(config, id_field)
        # fastjsonschema compiles the schema to Python (about 50x faster per record);
        # jsonschema explains the rare failure field by field.
        self._is_valid = fastjsonschema.compile(schema)
        self._explainer = Draft7Validator(schema)

    def external_id(self, record: Any) -> str | None:
        """The record's id as text, or None when it has no usable one."""
        if isinstance(record, Mapping):
            value = record.get(self.id_field)
            if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
                return str(value)
        return None

    def matches_schema(self, record: Any) -> bool:
        """Whether the record matches the collection's JSON Schema (the compiled check)."""
        try:
            self._is_valid(record)
        except fastjsonschema.JsonSchemaException:
            return False
        return True

    def reason(self, record: Any) -> str | None:
        """Why the record is refused (naming the field), or None if it is accepted."""
        if not isinstance(record, Mapping):
            return f"not a JSON object but {type(record).__name__}"
        if not self.matches_schema(record):
            errors = sorted(self._explainer.iter_errors(record), key=_path_key)
            return _explain(errors[0], self.id_field) if errors else "does not match the schema"
        for name, value in record.items():
            bad = _bad_value(value)
            if bad:
                return f"field {name!r}: {bad}"
        if len(json.dumps(record, ensure_ascii=False).encode("utf-8")) > MAX_RECORD_BYTES:
            return f"record larger than {MAX_RECORD_BYTES // 1024} KiB"
        return self._check_content(record)

    def _check_content(self, record: Mapping[str, Any]) -> str | None:
        cfg = self.config
        if cfg.vector_field is not None:
            vec = record[cfg.vector_field]
            if not any(v != 0 for v in vec):
                return f"field {cfg.vector_field!r}: the vector is all zeros"
            return None
        if all(record.get(f.name) in (None, "") for f in cfg.fields):
            names = ", ".join(repr(f.name) for f in cfg.fields)
            return f"no featurized field has a value (fields {names})"
        return None


def _path_key(error: Any) -> tuple[str, ...]:
    return tuple(str(p) for p in error.absolute_path)


def _explain(error: Any, id_field: str) -> str:
    path = list(error.absolute_path)
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else id_field
        return f"field {missing!r}: required field is missing"
    field = repr(path[0]) if path else "(record)"
    where = f"field {field}" + (f" item {path[1]}" if len(path) > 1 else "")
    if error.validator == "maxLength":
        return f"{where}: longer than {error.validator_value} characters"
    if error.validator in ("minItems", "maxItems"):
        return f"{where}: has {len(error.instance)} numbers, expected {error.validator_value}"
    if error.validator == "type":
        allowed = error.validator_value
        allowed = allowed if isinstance(allowed, str) else " or ".join(allowed)
        return f"{where}: expected {allowed}, got {type(error.instance).__name__}"
    return f"{where}: {error.message}"


def _bad_value(value: Any) -> str | None:
    """Non-finite numbers, lone surrogates (invalid UTF-8) and NUL characters, anywhere."""
    if isinstance(value, float) and not math.isfinite(value):
        return "non-finite number"
    if isinstance(value, str):
        if "\x00" in value:
            return "contains a NUL character"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "not valid UTF-8 (lone surrogate)"
    if isinstance(value, list):
        return next((b for b in map(_bad_value, value) if b), None)
    if isinstance(value, Mapping):
        return next((b for b in map(_bad_value, value.values()) if b), None)
    return None
