"""Celery beat schedule: one dict, built from settings.

``ER_EVAL_SCHEDULE`` names the collections to evaluate and how often: a JSON object
from collection name to seconds between runs or a five-field crontab line.
"""

from __future__ import annotations

import json
from typing import Any

from celery.schedules import crontab

from er.exceptions import ConfigError

__all__ = ["beat_schedule"]


def _when(value: Any, collection: str) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    if isinstance(value, str) and len(value.split()) == 5:
        minute, hour, day_of_month, month_of_year, day_of_week = value.split()
        return crontab(minute, hour, day_of_week, day_of_month, month_of_year)
    raise ConfigError(
        f"ER_EVAL_SCHEDULE: collection {collection!r} needs seconds > 0 or a crontab line "
        f"like '0 3 * * *'. Got {value!r}."
    )


def beat_schedule(eval_schedule: str) -> dict[str, dict[str, Any]]:
    """The beat schedule: a heartbeat, and one evaluation entry per scheduled collection."""
    schedule: dict[str, dict[str, Any]] = {
        "er-heartbeat": {"task": "er.ping", "schedule": 300.0},
    }
    try:
        wanted = json.loads(eval_schedule) if eval_schedule.strip() else {}
    except json.JSONDecodeError as exc:
        raise ConfigError(f"ER_EVAL_SCHEDULE is not JSON: {exc}") from None
    if not isinstance(wanted, dict):
        raise ConfigError("ER_EVAL_SCHEDULE must be a JSON object {collection: when}.")
    for collection, value in wanted.items():
        schedule[f"er-evaluate-{collection}"] = {
            "task": "er.evaluate",
            "schedule": _when(value, collection),
            "kwargs": {"collection": collection},
        }
    return schedule
