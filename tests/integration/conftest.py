"""Fixtures shared by the integration tests that run er's pipeline in this process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="module")
def settings(pg_url: str, falkordb_server: Any, tmp_path_factory: Any) -> Any:
    """er's settings on the session's PostgreSQL (schema upgraded) and embedded
    FalkorDB, with a data dir of the module's own."""
    from er.config import Settings
    from er.stores.sql import make_engine, upgrade

    engine = make_engine(pg_url)
    upgrade(engine)
    engine.dispose()
    return Settings(
        database_url=pg_url,
        graph_url=f"falkordb://:{falkordb_server.password}@127.0.0.1:{falkordb_server.port}",
        data_dir=Path(tmp_path_factory.mktemp("er-data")),
    )
