"""narrow posting blocks: each array of a block in the fewest bytes that hold its values

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 19:00:00.000000

``posting_blocks`` gets ``widths``: bytes per tool id (4 or 8), tf and document length (1, 2
or 4 each) as the three digits of one number. Blocks were all 8, 4 and 4; upgrade rewrites
each in the narrowest widths that hold its values (a cold search of a common term then reads a
third of the bytes), downgrade widens them back before the column goes. The conversion is
written out here rather than imported, so that this revision keeps doing what it did whatever
later code does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 2_000
"""Blocks read and rewritten per step: a common term's block alone can hold a million postings."""

WIDE = 844
_ID: dict[int, np.dtype[Any]] = {4: np.dtype("<u4"), 8: np.dtype("<i8")}
_VALUE: dict[int, np.dtype[Any]] = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<i4")}

_blocks = sa.table(
    "posting_blocks",
    sa.column("term_id", sa.Integer),
    sa.column("grp", sa.SmallInteger),
    sa.column("widths", sa.SmallInteger),
    sa.column("tool_ids", sa.LargeBinary),
    sa.column("tfs", sa.LargeBinary),
    sa.column("doc_lens", sa.LargeBinary),
)

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]


def _dtypes(widths: int) -> tuple[np.dtype[Any], np.dtype[Any], np.dtype[Any]]:
    return _ID[widths // 100], _VALUE[widths // 10 % 10], _VALUE[widths % 10]


def _narrowest(values: np.ndarray, dtypes: dict[int, np.dtype[Any]]) -> int:
    if values.size == 0:
        return min(dtypes)
    if int(values.min()) < 0:
        return max(dtypes)
    high = int(values.max())
    fitting = (width for width, dtype in sorted(dtypes.items()) if high <= np.iinfo(dtype).max)
    return next(fitting, max(dtypes))


def _narrow(arrays: Arrays) -> tuple[int, Arrays]:
    ids, tf, lengths = arrays
    widths = (_narrowest(ids, _ID), _narrowest(tf, _VALUE), _narrowest(lengths, _VALUE))
    dtypes = (_ID[widths[0]], _VALUE[widths[1]], _VALUE[widths[2]])
    narrowed = (ids.astype(dtypes[0]), tf.astype(dtypes[1]), lengths.astype(dtypes[2]))
    return widths[0] * 100 + widths[1] * 10 + widths[2], narrowed


def _wide(arrays: Arrays) -> tuple[int, Arrays]:
    ids, tf, lengths = arrays
    return WIDE, (ids.astype(_ID[8]), tf.astype(_VALUE[4]), lengths.astype(_VALUE[4]))


def _rewrite(convert: Callable[[Arrays], tuple[int, Arrays]]) -> None:
    """Every block, converted, in steps of ``BATCH`` keys in key order."""
    bind = op.get_bind()
    update = (
        sa.update(_blocks)
        .where(_blocks.c.term_id == sa.bindparam("term"), _blocks.c.grp == sa.bindparam("group"))
        .values(
            widths=sa.bindparam("new_widths"),
            tool_ids=sa.bindparam("ids"),
            tfs=sa.bindparam("tf"),
            doc_lens=sa.bindparam("lengths"),
        )
    )
    after: tuple[int, int] = (-1, -1)
    while rows := bind.execute(
        sa.select(_blocks)
        .where(sa.tuple_(_blocks.c.term_id, _blocks.c.grp) > sa.tuple_(*after))
        .order_by(_blocks.c.term_id, _blocks.c.grp)
        .limit(BATCH)
    ).all():
        changes: list[dict[str, Any]] = []
        for row in rows:
            id_type, tf_type, len_type = _dtypes(row.widths)
            stored = (
                np.frombuffer(row.tool_ids, id_type),
                np.frombuffer(row.tfs, tf_type),
                np.frombuffer(row.doc_lens, len_type),
            )
            widths, (ids, tf, lengths) = convert(stored)
            if widths != row.widths:
                changes.append(
                    {
                        "term": row.term_id,
                        "group": row.grp,
                        "new_widths": widths,
                        "ids": ids.tobytes(),
                        "tf": tf.tobytes(),
                        "lengths": lengths.tobytes(),
                    }
                )
        if changes:
            bind.execute(update, changes)
        after = (rows[-1].term_id, rows[-1].grp)


def upgrade() -> None:
    with op.batch_alter_table("posting_blocks") as batch:
        batch.add_column(
            sa.Column("widths", sa.SmallInteger(), nullable=False, server_default=sa.text(str(WIDE)))
        )
    _rewrite(_narrow)


def downgrade() -> None:
    _rewrite(_wide)
    with op.batch_alter_table("posting_blocks") as batch:
        batch.drop_column("widths")
