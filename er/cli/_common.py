"""What the command groups share: settings, store openers, JSON arguments, a spinner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from er.exceptions import ERError


def _settings() -> Any:
    from er.config import get_settings

    settings = get_settings()
    # the data dir holds every record (SQLite, the graph's log, checkpoints, reports):
    # one made here is its user's alone
    settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    return settings


def _graph(settings: Any) -> Any:
    from er.stores.graph import open_graph_store

    return open_graph_store(
        settings.graph_url,
        data_dir=settings.data_dir,
        graph_name=settings.graph_name,
        user=settings.graph_user,
        password=settings.graph_password,
    )


def _database(settings: Any) -> Any:
    """An engine on ``ER_DATABASE_URL``, checked to answer; one clear line if not."""
    import sqlalchemy.exc

    from er.stores.sql import make_engine

    try:
        engine = make_engine(settings.sqlalchemy_url)
        with engine.connect():
            pass
    except (sqlalchemy.exc.SQLAlchemyError, ImportError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ERError(f"cannot reach the database (ER_DATABASE_URL): {first}") from None
    return engine


def _json_arg(text: str | None, what: str) -> Any:
    """JSON given inline or as @path; one clear line when it is not JSON."""
    if text is None:
        return None
    source = text
    if text.startswith("@"):
        path = Path(text[1:])
        if not path.is_file():
            raise ERError(f"{what}: no such file {path}.")
        source = path.read_text(encoding="utf-8")
    try:
        return json.loads(source)
    except json.JSONDecodeError as exc:
        raise ERError(f"{what} is not JSON: {exc}") from None


# -- plumbing -------------------------------------------------------------------------------
class _progress:
    """A rich spinner for work without steps (a single fit)."""

    def __init__(self, text: str) -> None:
        from rich.console import Console

        self._status = Console(stderr=True).status(text)

    def __enter__(self) -> None:
        self._status.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._status.__exit__(*exc)
