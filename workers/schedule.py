"""Celery beat schedule: one dict. Evaluation reports join it with the pipeline."""

from __future__ import annotations

from typing import Any

BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    "er-heartbeat": {"task": "er.ping", "schedule": 300.0},
}
