"""Celery tasks (thin: parse ids, call one er.pipeline function, declare retries)."""

from __future__ import annotations

from typing import Any

from er.exceptions import TransientStoreError
from workers.app import app, settings


@app.task(name="er.ping")
def ping() -> str:
    """Liveness probe used by the compose health check and the beat heartbeat."""
    return "pong"


@app.task(
    name="er.evaluate",
    autoretry_for=(TransientStoreError,),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def evaluate(collection: str, as_of: int | None = None) -> dict[str, Any]:
    """Evaluate a collection against its gold labels; store the run and its report."""
    from er.pipeline import run_evaluation

    out = run_evaluation(settings, collection, as_of=as_of)
    return {k: out[k] for k in ("run_id", "as_of_seq", "report_path")}
