"""Hyper-parameter validation shared by the estimators (one constraints table each)."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

from er.exceptions import ConfigError


@dataclass(frozen=True)
class Interval:
    """A numeric range; ``kind`` is int or float."""

    kind: type
    low: float | None
    high: float | None

    def accepts(self, value: Any) -> bool:
        if isinstance(value, bool):
            return False
        ok_type = (
            isinstance(value, numbers.Integral)
            if self.kind is int
            else isinstance(value, numbers.Real)
        )
        if not ok_type:
            return False
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def describe(self) -> str:
        name = "an int" if self.kind is int else "a float"
        lo = "-inf" if self.low is None else self.low
        hi = "inf" if self.high is None else self.high
        return f"{name} in the range [{lo}, {hi}]"


@dataclass(frozen=True)
class Options:
    values: tuple[Any, ...]

    def accepts(self, value: Any) -> bool:
        return value in self.values

    def describe(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)


NONE = Options((None,))


def validate_params(estimator: Any) -> None:
    """Check every hyper-parameter of ``estimator`` against its ``_parameter_constraints``.

    Raises
    ------
    ConfigError
        Naming the parameter, the class, what is allowed and what was given.
    """
    for name, allowed in estimator._parameter_constraints.items():
        value = getattr(estimator, name)
        if not any(rule.accepts(value) for rule in allowed):
            what = " or ".join(rule.describe() for rule in allowed)
            raise ConfigError(
                f"The {name!r} parameter of {type(estimator).__name__} must be {what}. "
                f"Got {value!r} instead."
            )


def get_params(estimator: Any) -> dict[str, Any]:
    """The estimator's hyper-parameters as a JSON-ready dict."""
    return {name: getattr(estimator, name) for name in estimator._parameter_constraints}
