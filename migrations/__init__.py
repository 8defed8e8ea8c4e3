"""Alembic migrations (shipped as er._migrations)."""
