"""Alembic environment: the URL comes from er's settings unless an engine is passed."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Engine

from er.stores.sql._migrate import make_engine
from er.stores.sql._models import Base

config = context.config
target_metadata = Base.metadata


def _engine() -> Engine:
    passed = config.attributes.get("engine")
    if passed is not None:
        return passed
    from er.config import get_settings  # entry point: settings are read only here

    return make_engine(get_settings().sqlalchemy_url)


def run_migrations_offline() -> None:
    from er.config import get_settings

    context.configure(
        url=get_settings().sqlalchemy_url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = _engine()
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            # SQLite alters tables by copy-and-move ("batch mode").
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
