"""packed postings: one block per (term, group), a delta of overrides, each tool's indexed terms

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 18:20:00.000000

The row-per-posting table becomes ``posting_blocks`` (a term's postings in one group, packed as
little-endian arrays sorted by tool id) and ``posting_delta`` (overrides written by small
updates); each tool row gets its ``(term id, tf)`` pairs packed in ``indexed_terms``. The data
moves both ways: upgrade packs the rows, downgrade unpacks the blocks with their overrides.
The packing is written out here rather than imported, so that this revision keeps doing what it
did whatever later code does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = np.dtype("<i8")
VALUE = np.dtype("<i4")
FORWARD = np.dtype([("term_id", "<i8"), ("tf", "<i4")])
BATCH = 5000

blocks = sa.table(
    "posting_blocks",
    sa.column("term_id", sa.Integer),
    sa.column("grp", sa.SmallInteger),
    sa.column("size", sa.Integer),
    sa.column("tool_ids", sa.LargeBinary),
    sa.column("tfs", sa.LargeBinary),
    sa.column("doc_lens", sa.LargeBinary),
)
postings = sa.table(
    "postings",
    sa.column("term_id", sa.Integer),
    sa.column("grp", sa.SmallInteger),
    sa.column("tool_id", sa.Integer),
    sa.column("tf", sa.Integer),
    sa.column("doc_len", sa.Integer),
)


def upgrade() -> None:
    op.create_table(
        "posting_blocks",
        sa.Column("term_id", sa.Integer(), nullable=False),
        sa.Column("grp", sa.SmallInteger(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("tool_ids", sa.LargeBinary(), nullable=False),
        sa.Column("tfs", sa.LargeBinary(), nullable=False),
        sa.Column("doc_lens", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("term_id", "grp", name=op.f("pk_posting_blocks")),
    )
    op.create_table(
        "posting_delta",
        sa.Column("term_id", sa.Integer(), nullable=False),
        sa.Column("grp", sa.SmallInteger(), nullable=False),
        sa.Column("tool_id", sa.Integer(), nullable=False),
        sa.Column("tf", sa.Integer(), nullable=False),
        sa.Column("doc_len", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("term_id", "grp", "tool_id", name=op.f("pk_posting_delta")),
        sqlite_with_rowid=False,
    )
    with op.batch_alter_table("tools", schema=None) as batch_op:
        batch_op.add_column(sa.Column("indexed_terms", sa.LargeBinary(), nullable=True))

    bind = op.get_bind()
    rows = bind.execute(
        sa.text("SELECT term_id, grp, tool_id, tf, doc_len FROM postings ORDER BY term_id, grp, tool_id")
    )
    for run in _batches(_runs(rows, key_width=2)):
        op.bulk_insert(blocks, [_block(key, members) for key, members in run])
    rows = bind.execute(sa.text("SELECT tool_id, term_id, tf FROM postings ORDER BY tool_id, term_id"))
    forward = sa.text("UPDATE tools SET indexed_terms = :packed WHERE id = :tool_id")
    for run in _batches(_runs(rows, key_width=1)):
        bind.execute(
            forward,
            [
                {"tool_id": key[0], "packed": np.array([(t, tf) for _, t, tf in members], FORWARD).tobytes()}
                for key, members in run
            ],
        )
    unindexed = sa.text("UPDATE tools SET indexed_terms = :empty WHERE indexed_terms IS NULL")
    bind.execute(unindexed, {"empty": b""})

    with op.batch_alter_table("postings", schema=None) as batch_op:
        batch_op.drop_index("ix_postings_tool_id")
    op.drop_table("postings")
    # After the postings are gone: on SQLite this copies the tools table, and dropping the old
    # copy would cascade to the postings that reference it.
    with op.batch_alter_table("tools", schema=None) as batch_op:
        batch_op.alter_column("indexed_terms", existing_type=sa.LargeBinary(), nullable=False)


def downgrade() -> None:
    bind = op.get_bind()
    overrides: dict[tuple[int, int], dict[int, tuple[int, int]]] = {}
    for term_id, grp, tool_id, tf, doc_len in bind.execute(
        sa.text("SELECT term_id, grp, tool_id, tf, doc_len FROM posting_delta")
    ):
        overrides.setdefault((term_id, grp), {})[tool_id] = (tf, doc_len)
    unpacked: dict[tuple[int, int], dict[int, tuple[int, int]]] = {}
    stored = bind.execute(sa.text("SELECT term_id, grp, tool_ids, tfs, doc_lens FROM posting_blocks"))
    for term_id, grp, tool_ids, tfs, doc_lens in stored:
        unpacked[(term_id, grp)] = dict(
            zip(
                np.frombuffer(tool_ids, ID).tolist(),
                zip(np.frombuffer(tfs, VALUE).tolist(), np.frombuffer(doc_lens, VALUE).tolist(), strict=True),
                strict=True,
            )
        )
    for key, entries in overrides.items():
        unpacked.setdefault(key, {}).update(entries)

    op.drop_table("posting_delta")
    op.drop_table("posting_blocks")
    with op.batch_alter_table("tools", schema=None) as batch_op:
        batch_op.drop_column("indexed_terms")
    # Created after the tools table is copied without the column (SQLite), for the same reason
    # as in ``upgrade``: dropping the old copy would cascade to rows referencing it.
    op.create_table(
        "postings",
        sa.Column("term_id", sa.Integer(), nullable=False),
        sa.Column("grp", sa.SmallInteger(), nullable=False),
        sa.Column("tool_id", sa.Integer(), nullable=False),
        sa.Column("tf", sa.Integer(), nullable=False),
        sa.Column("doc_len", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tool_id"],
            ["tools.id"],
            name=op.f("fk_postings_tool_id_tools"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("term_id", "grp", "tool_id", name=op.f("pk_postings")),
        sqlite_with_rowid=False,
    )
    with op.batch_alter_table("postings", schema=None) as batch_op:
        batch_op.create_index("ix_postings_tool_id", ["tool_id"], unique=False)
    for (term_id, grp), entries in sorted(unpacked.items()):
        rows = [
            {"term_id": term_id, "grp": grp, "tool_id": tool_id, "tf": tf, "doc_len": doc_len}
            for tool_id, (tf, doc_len) in sorted(entries.items())
            if tf > 0
        ]
        if rows:
            op.bulk_insert(postings, rows)


def _runs(rows: Any, *, key_width: int) -> Iterator[tuple[tuple[int, ...], list[tuple[int, ...]]]]:
    """Consecutive rows sharing their first ``key_width`` columns."""
    key: tuple[int, ...] | None = None
    members: list[tuple[int, ...]] = []
    for row in rows:
        row_key = tuple(row[:key_width])
        if row_key != key:
            if key is not None:
                yield key, members
            key, members = row_key, []
        members.append(tuple(row))
    if key is not None:
        yield key, members


def _batches(runs: Iterator[Any]) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for run in runs:
        batch.append(run)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _block(key: tuple[int, ...], members: list[tuple[int, ...]]) -> dict[str, Any]:
    return {
        "term_id": key[0],
        "grp": key[1],
        "size": len(members),
        "tool_ids": np.array([m[2] for m in members], ID).tobytes(),
        "tfs": np.array([m[3] for m in members], VALUE).tobytes(),
        "doc_lens": np.array([m[4] for m in members], VALUE).tobytes(),
    }
