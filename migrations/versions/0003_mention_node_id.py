"""Mention node ids: each accepted record maps to its leaf node in the graph.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("mentions") as batch:
        batch.add_column(sa.Column("node_id", sa.BigInteger(), nullable=True))
        batch.create_index("ix_mentions_collection_id_node_id", ["collection_id", "node_id"])


def downgrade() -> None:
    with op.batch_alter_table("mentions") as batch:
        batch.drop_index("ix_mentions_collection_id_node_id")
        batch.drop_column("node_id")
