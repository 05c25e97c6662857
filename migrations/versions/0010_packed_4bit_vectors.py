"""tool vectors at 4 bits: two values a byte instead of one int8

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05 04:00:00.000000

Every stored vector is rewritten from int8 values with a scale to 4-bit values with a scale,
packed two to a byte (the layout of ``discovery._semantic.vectors.packed``): the vector the int8
values stood for (values times scale) is quantized again with the scale max|v| / 7, so an index
keeps its vectors without embedding its tools again. Downgrade writes the 4-bit values back as
int8 with the same scale (the same vectors, exactly). The schema is unchanged; an index without
vectors is left as it was. The conversion is written out here rather than imported, so that this
revision keeps doing what it did whatever later code does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 2_000
"""Vectors read and rewritten per step."""

LEVELS = 7
"""Values are −7..7; a vector's largest component is ±7."""

_vectors = sa.table(
    "tool_vectors",
    sa.column("tool_name", sa.Text),
    sa.column("scale", sa.Float),
    sa.column("vector", sa.LargeBinary),
)


def _to_4bit(scale: float, stored: bytes, dimensions: int) -> tuple[float, bytes]:
    """int8 values with their scale as packed 4-bit values with theirs: two's complement
    nibbles, the even dimension's high in its byte, an odd count's last low nibble 0."""
    vector = np.frombuffer(stored, np.int8).astype(np.float32) * np.float32(scale)
    largest = float(np.abs(vector).max()) if vector.size else 0.0
    new_scale = np.float32(largest / LEVELS) if largest > 0 else np.float32(1.0)
    values = np.clip(np.rint(vector / new_scale), -LEVELS, LEVELS).astype(np.int8)
    nibbles = np.zeros(2 * ((len(values) + 1) // 2), np.uint8)
    nibbles[: len(values)] = values.view(np.uint8) & 0x0F
    return float(new_scale), ((nibbles[0::2] << 4) | nibbles[1::2]).astype(np.uint8).tobytes()


def _to_int8(scale: float, stored: bytes, dimensions: int) -> tuple[float, bytes]:
    """4-bit values back as int8 with the same scale, as many as the index's ``dimensions``
    (an odd count's padding nibble dropped)."""
    packed = np.frombuffer(stored, np.uint8)
    high = (packed >> 4).astype(np.int16)
    low = (packed & 0x0F).astype(np.int16)
    values = np.empty(2 * len(packed), np.int16)
    values[0::2], values[1::2] = high, low
    values[values > 7] -= 16
    return scale, values[: dimensions or len(values)].astype(np.int8).tobytes()


def _rewrite(convert: Callable[[float, bytes, int], tuple[float, bytes]]) -> None:
    """Every vector, converted, in steps of ``BATCH`` names in name order."""
    bind = op.get_bind()
    dimensions = int(
        bind.execute(sa.text("SELECT dimensions FROM embedding_state WHERE id = 1")).scalar() or 0
    )
    update = (
        sa.update(_vectors)
        .where(_vectors.c.tool_name == sa.bindparam("name"))
        .values(scale=sa.bindparam("new_scale"), vector=sa.bindparam("new_vector"))
    )
    after: str | None = None
    while True:
        query = sa.select(_vectors).order_by(_vectors.c.tool_name).limit(BATCH)
        if after is not None:
            query = query.where(_vectors.c.tool_name > after)
        rows = bind.execute(query).all()
        if not rows:
            break
        changes: list[dict[str, Any]] = []
        for row in rows:
            scale, vector = convert(float(row.scale), bytes(row.vector), dimensions)
            changes.append({"name": row.tool_name, "new_scale": scale, "new_vector": vector})
        bind.execute(update, changes)
        after = rows[-1].tool_name


def upgrade() -> None:
    _rewrite(_to_4bit)


def downgrade() -> None:
    _rewrite(_to_int8)
