"""Workers and failed tasks: heartbeats, the worker that took a batch, its retries.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _id() -> sa.types.TypeEngine:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _json() -> sa.types.TypeEngine:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def _stamp(name: str) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False)


def upgrade() -> None:
    op.create_table(
        "workers",
        sa.Column("id", _id(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("host", sa.String(length=200), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("queues", sa.String(length=500), nullable=False),
        sa.Column("interval_s", sa.Float(), nullable=False),
        _stamp("started_at"),
        _stamp("last_seen"),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_task", sa.String(length=500), nullable=True),
        sa.Column("last_task_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workers")),
    )
    op.create_table(
        "failed_tasks",
        sa.Column("id", _id(), nullable=False),
        sa.Column("task", sa.String(length=100), nullable=False),
        sa.Column("collection", sa.String(length=200), nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("kwargs", _json(), nullable=False),
        sa.Column("retried_at", sa.DateTime(timezone=True), nullable=True),
        _stamp("created_at"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_failed_tasks")),
    )
    op.create_index(
        op.f("ix_failed_tasks_collection"), "failed_tasks", ["collection"], unique=False
    )
    with op.batch_alter_table("batches") as batch:
        batch.add_column(sa.Column("worker_id", _id(), nullable=True))
        batch.add_column(sa.Column("retries", _json(), nullable=True))
        batch.create_foreign_key(
            op.f("fk_batches_worker_id_workers"),
            "workers",
            ["worker_id"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade() -> None:
    with op.batch_alter_table("batches") as batch:
        batch.drop_constraint(op.f("fk_batches_worker_id_workers"), type_="foreignkey")
        batch.drop_column("retries")
        batch.drop_column("worker_id")
    op.drop_index(op.f("ix_failed_tasks_collection"), table_name="failed_tasks")
    op.drop_table("failed_tasks")
    op.drop_table("workers")
