"""What a tool's vector is made from, and how vectors are kept: int8 with one scale each."""

from __future__ import annotations

import numpy as np


def tool_text(label: str, description: str) -> str:
    """The text a tool is embedded from: its label with the separators of names as spaces (so
    ``github/create_issue`` reads as words), then its description. The tokenizer truncates it."""
    words = " ".join(label.replace("__", " ").replace("_", " ").replace("/", ": ").split())
    return f"{words}: {description}" if description.strip() else words


def quantized(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``vectors`` (float rows) as int8 rows and the scale of each: ``row * scale`` is the vector
    to within half a step of its largest value. A quarter of float32's size, and the cosine with
    a float query is the int8 dot product times the scale."""
    largest = np.abs(vectors).max(axis=1) if vectors.size else np.zeros(len(vectors))
    scales = np.where(largest > 0, largest / 127.0, 1.0).astype(np.float32)
    rows = np.clip(np.rint(vectors / scales[:, None]), -127, 127).astype(np.int8)
    return rows, scales
