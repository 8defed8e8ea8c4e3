"""Initial schema: collections, mentions, batches, rejected records, eval runs.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _id() -> sa.types.TypeEngine:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _json() -> sa.types.TypeEngine:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def _created_at() -> sa.Column:
    return sa.Column(
        "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
    )


def _collection_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["collection_id"],
        ["collections.id"],
        name=op.f(f"fk_{table}_collection_id_collections"),
        ondelete="CASCADE",
    )


def upgrade() -> None:
    op.create_table(
        "collections",
        sa.Column("id", _id(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("config", _json(), nullable=False),
        _created_at(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_collections")),
        sa.UniqueConstraint("name", name=op.f("uq_collections_name")),
    )
    op.create_table(
        "batches",
        sa.Column("id", _id(), nullable=False),
        sa.Column("collection_id", _id(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("n_accepted", sa.Integer(), nullable=False),
        sa.Column("n_rejected", sa.Integer(), nullable=False),
        sa.Column("timings", _json(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        _created_at(),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        _collection_fk("batches"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_batches")),
        sa.UniqueConstraint("collection_id", "seq", name=op.f("uq_batches_collection_id_seq")),
    )
    op.create_index(op.f("ix_batches_status"), "batches", ["status"], unique=False)
    op.create_table(
        "eval_runs",
        sa.Column("id", _id(), nullable=False),
        sa.Column("collection_id", _id(), nullable=False),
        sa.Column("algorithm", sa.String(length=50), nullable=False),
        sa.Column("params", _json(), nullable=False),
        sa.Column("as_of_seq", sa.BigInteger(), nullable=True),
        sa.Column("metrics", _json(), nullable=False),
        sa.Column("report_path", sa.Text(), nullable=True),
        _created_at(),
        _collection_fk("eval_runs"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_eval_runs")),
    )
    op.create_table(
        "mentions",
        sa.Column("id", _id(), nullable=False),
        sa.Column("collection_id", _id(), nullable=False),
        sa.Column("external_id", sa.String(length=512), nullable=False),
        sa.Column("payload", _json(), nullable=False),
        sa.Column("gold_entity", sa.String(length=512), nullable=True),
        sa.Column("batch_seq", sa.BigInteger(), nullable=False),
        _created_at(),
        _collection_fk("mentions"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mentions")),
        sa.UniqueConstraint(
            "collection_id", "external_id", name=op.f("uq_mentions_collection_id_external_id")
        ),
    )
    op.create_index(op.f("ix_mentions_batch_seq"), "mentions", ["batch_seq"], unique=False)
    op.create_table(
        "rejected_records",
        sa.Column("id", _id(), nullable=False),
        sa.Column("collection_id", _id(), nullable=False),
        sa.Column("external_id", sa.String(length=512), nullable=True),
        sa.Column("payload", _json(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        _created_at(),
        _collection_fk("rejected_records"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rejected_records")),
    )


def downgrade() -> None:
    op.drop_table("rejected_records")
    op.drop_index(op.f("ix_mentions_batch_seq"), table_name="mentions")
    op.drop_table("mentions")
    op.drop_table("eval_runs")
    op.drop_index(op.f("ix_batches_status"), table_name="batches")
    op.drop_table("batches")
    op.drop_table("collections")
