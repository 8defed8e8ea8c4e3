"""Celery tasks (thin: parse ids, call one er.pipeline function, declare retries)."""

from __future__ import annotations

from workers.app import app


@app.task(name="er.ping")
def ping() -> str:
    """Liveness probe used by the compose health check and the beat heartbeat."""
    return "pong"
