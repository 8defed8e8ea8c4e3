"""The collection config a user gives (``er ingest --config``), as one declared schema.

Every key, its type and its allowed values are stated here once (pydantic); a config
that breaks them is refused with one line naming the key, what it must be and what was
given. What depends on the records (the featurizer and field types inferred from the
first batch) and on several keys at once stays in :mod:`er.pipeline.config`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from er.exceptions import ConfigError
from er.featurize._types import FIELD_TYPES

Algorithm = Literal["mbscc", "grinch", "llama"]
Scoring = Literal["pair_model", "cosine"]
Candidates = Literal["keys", "exact", "words"]


class GivenConfig(BaseModel):
    """The keys of a collection config a user may give; each left out is defaulted."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    featurizer: dict[str, Any] | None = Field(
        None, description="hashed features and their fields (er.featurize.FeaturizerConfig)"
    )
    algorithm: Algorithm | None = Field(None, description="the incremental core")
    params: dict[str, Any] | None = Field(None, description="the core's parameters")
    cut_threshold: float | None = Field(
        None,
        ge=-1.0,
        le=1.0,
        description="the entity cut: a match probability, or a cosine for cosine scoring",
    )
    scoring: Scoring | None = Field(None, description="how candidate pairs are scored")
    field_types: dict[str, str] | None = Field(
        None, description=f"field name -> one of {', '.join(FIELD_TYPES)}"
    )
    candidates: Candidates | None = Field(None, description="how candidate pairs are found")


#: The keys a config may give, in the schema's order.
CONFIG_KEYS: tuple[str, ...] = tuple(GivenConfig.model_fields)


def checked_config(given: Any) -> dict[str, Any]:
    """The keys ``given`` sets, checked against :class:`GivenConfig`.

    Raises
    ------
    ConfigError
        One line: the first key that breaks the schema, what it must be, what it was.
    """
    if not isinstance(given, Mapping):
        raise ConfigError(f"collection config must be a JSON object. Got {given!r}.")
    try:
        # JSON numbers: an int is a float here, a bool is not (strict mode)
        doc = {k: _number(v) if k == "cut_threshold" else v for k, v in given.items()}
        return GivenConfig.model_validate(doc).model_dump(exclude_unset=True)
    except ValidationError as exc:
        raise ConfigError(_one_line(exc)) from None


def _number(value: Any) -> Any:
    """A JSON integer as the float it means (strict mode takes no int for a float; a
    bool stays a bool, and is refused)."""
    return float(value) if type(value) is int else value


def _one_line(exc: ValidationError) -> str:
    """The first error of a validation, in the project's words."""
    err = exc.errors()[0]
    where = ".".join(str(part) for part in err["loc"])
    if err["type"] == "extra_forbidden":
        return f"collection config: unknown key {where!r}; known {list(CONFIG_KEYS)}."
    got = err.get("input")
    return f"collection config: {where}: {_what(err)}. Got {got!r}."


def _what(err: Any) -> str:
    """What the value must be, from pydantic's error (its message for the rest)."""
    kind = err["type"]
    if kind == "literal_error":
        return "must be one of " + str(err["ctx"]["expected"]).replace(" or ", ", ")
    if kind in ("float_type", "float_parsing"):
        return "must be a number"
    if kind in ("dict_type", "model_type"):
        return "must be an object"
    if kind == "string_type":
        return "must be a string"
    return str(err["msg"]).lower()
