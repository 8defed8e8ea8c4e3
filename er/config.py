"""Service wiring read from the environment (``ER_*``).

Only entry points (the CLI, Celery workers, Alembic's ``env.py``) call
:func:`get_settings`; library code receives drivers, engines and paths as
arguments and never reads the environment itself.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """er's service settings.

    Attributes
    ----------
    data_dir : Path
        Where embedded databases, ANN segments and checkpoints live (``ER_DATA_DIR``).
    database_url : str or None
        SQLAlchemy URL of the relational store (``ER_DATABASE_URL``); ``None`` means a
        SQLite file in the data dir. PostgreSQL: ``postgresql+psycopg://user@host/db``.
    graph_url : str
        ``falkordb+embedded://`` (default: a FalkorDB child process on a free loopback
        port with its data in the data dir), ``falkordb://host:port`` for an external
        FalkorDB, ``neo4j://`` or ``bolt://`` for Neo4j (``ER_GRAPH_URL``).
    graph_user, graph_password : str or None
        Credentials for Neo4j (``ER_GRAPH_USER``, ``ER_GRAPH_PASSWORD``).
    graph_name : str
        Graph (FalkorDB) or database (Neo4j) holding all collections (``ER_GRAPH_NAME``).
    broker_url : str or None
        Celery broker (``ER_BROKER_URL``), e.g. ``redis://127.0.0.1:6379/0`` or
        ``amqp://guest@127.0.0.1//``. Unset: ``er ingest`` runs the tasks in process.
    eval_schedule : str
        Scheduled evaluations (``ER_EVAL_SCHEDULE``): a JSON object from collection name
        to seconds between runs or a crontab line, e.g.
        ``{"people": 3600, "products": "0 3 * * *"}``. Empty: none.
    heartbeat_s : float
        Seconds between a worker process's heartbeats (``ER_HEARTBEAT_S``); ``er status``
        calls a worker gone, and the batches it left running stranded, once it has been
        silent for twice its interval.
    """

    model_config = SettingsConfigDict(env_prefix="ER_", extra="ignore")

    data_dir: Path = Field(default=Path(".er"))
    database_url: str | None = None
    graph_url: str = "falkordb+embedded://"
    graph_user: str | None = None
    graph_password: str | None = None
    graph_name: str = "er"
    broker_url: str | None = None
    eval_schedule: str = ""
    heartbeat_s: float = Field(default=5.0, gt=0)

    @property
    def reports_dir(self) -> Path:
        """Where evaluation reports are written (``<data_dir>/reports``)."""
        return self.data_dir / "reports"

    @property
    def sqlalchemy_url(self) -> str:
        """The relational store's URL, defaulting to SQLite under ``data_dir``."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'er.sqlite3').resolve()}"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Build the settings once per process (entry points only)."""
    return Settings()
