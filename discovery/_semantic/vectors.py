"""What a tool's vector is made from, and how vectors are kept: 4 bits a value, two values a byte,
with one scale each."""

from __future__ import annotations

import numpy as np

LEVELS = 7
"""The largest magnitude of a stored value: values are the integers −7..7, so a vector's largest
component is stored exactly as ±7 (its scale is that component over 7) and 0 stays 0."""


def tool_text(label: str, description: str) -> str:
    """The text a tool is embedded from: its label with the separators of names as spaces (so
    ``github/create_issue`` reads as words), then its description. The tokenizer truncates it."""
    words = " ".join(label.replace("__", " ").replace("_", " ").replace("/", ": ").split())
    return f"{words}: {description}" if description.strip() else words


def packed(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``vectors`` (float rows) as packed 4-bit rows and the scale of each: the vector is the
    rounded values times the scale, to within half a step (scale / 2) in every dimension.

    A value is ``round(v / scale)`` clipped to −7..7, with ``scale = max|v| / 7`` (1 for a zero
    vector, whose values are all 0). The values of dimensions ``2i`` and ``2i + 1`` share byte
    ``i``: the even dimension in the high nibble, the odd one in the low nibble, each in 4-bit
    two's complement (−7 is ``0x9``, 0 is ``0x0``, 7 is ``0x7``). An odd dimension count pads the
    last byte's low nibble with 0. Rows are uint8, ``ceil(d / 2)`` bytes each: an eighth of
    float32's size. The cosine with a float query is the values' dot product times the scale."""
    largest = np.abs(vectors).max(axis=1) if vectors.size else np.zeros(len(vectors))
    scales = np.where(largest > 0, largest / LEVELS, 1.0).astype(np.float32)
    values = np.clip(np.rint(vectors / scales[:, None]), -LEVELS, LEVELS).astype(np.int8)
    count, dimensions = values.shape
    nibbles = np.zeros((count, 2 * ((dimensions + 1) // 2)), dtype=np.uint8)
    nibbles[:, :dimensions] = values.view(np.uint8) & 0x0F
    rows = (nibbles[:, 0::2] << 4) | nibbles[:, 1::2]
    return rows, scales
