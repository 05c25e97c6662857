"""BM25+ of SPEC §4: constants, field weights and one small pure function per formula term.

Every function evaluates in the reference's order of operations so that equal inputs give
bit-identical doubles, which is what makes score ties reproducible.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

from discovery.tokenize import tokenize

K1 = 1.2
B = 0.75
DELTA = 1.0

FIELD_WEIGHTS: Mapping[str, int] = {
    "name": 6,
    "label": 4,
    "mcp_tool_name": 4,
    "server_name": 2,
    "summary": 2,
    "schema_key": 1,
}
"""Each token occurrence in a field adds that field's weight to the term frequency [fixed]."""


def idf(n_docs: int, df: int) -> float:
    """``ln(1 + (N − df + 0.5) / (df + 0.5))``."""
    return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))


def length_norm(doc_len: float, avgdl: float) -> float:
    """``k1 · (1 − b + b · (len / avgdl))``."""
    return K1 * (1 - B + B * (doc_len / avgdl))


def term_score(qtf: int, idf_value: float, tf: float, norm: float) -> float:
    """One matched query term: ``qtf · idf · ((tf · (k1 + 1)) / (tf + norm) + δ)``."""
    return qtf * idf_value * ((tf * (K1 + 1)) / (tf + norm) + DELTA)


def term_upper_bound(qtf: int, idf_value: float, max_tf: float) -> float:
    """The largest contribution a term can make to any document: its best tf at length 0.

    ``term_score`` grows with tf and shrinks as the document gets longer, so no document can
    exceed this; pruning may use it to skip work without changing a result.
    """
    return term_score(qtf, idf_value, max_tf, K1 * (1 - B))


def average_length(n_docs: int, total_len: float) -> float:
    """Mean document length, or ``1`` when the corpus is empty or the mean is 0."""
    if n_docs <= 0:
        return 1.0
    mean = total_len / n_docs
    return mean if mean > 0 else 1.0


def query_term_counts(query: str) -> dict[str, int]:
    """Distinct query tokens with their counts, in order of first appearance."""
    return dict(Counter(tokenize(query)))


def round6(score: float) -> float:
    """Round to 6 decimals as the reference reports scores (half away from zero)."""
    return math.floor(score * 1_000_000 + 0.5) / 1_000_000


def field_texts(
    *,
    name: str,
    label: str,
    mcp_tool_name: str | None,
    server_name: str | None,
    summary: str,
    schema_keys: Iterable[str],
) -> list[tuple[str, str]]:
    """The indexed ``(field, text)`` pairs of a tool, one per schema key."""
    pairs = [("name", name), ("label", label)]
    if mcp_tool_name:
        pairs.append(("mcp_tool_name", mcp_tool_name))
    if server_name:
        pairs.append(("server_name", server_name))
    pairs.append(("summary", summary))
    pairs.extend(("schema_key", key) for key in schema_keys)
    return pairs


def field_term_frequencies(pairs: Iterable[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """Weighted term frequencies per field: ``{field: {term: weight · occurrences}}``."""
    per_field: dict[str, dict[str, int]] = {}
    for field, text in pairs:
        weight = FIELD_WEIGHTS[field]
        bucket = per_field.setdefault(field, {})
        for token in tokenize(text):
            bucket[token] = bucket.get(token, 0) + weight
    return per_field


def document_term_frequencies(pairs: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Weighted term frequencies of a whole document; their sum is the document length."""
    totals: dict[str, int] = {}
    for field, text in pairs:
        weight = FIELD_WEIGHTS[field]
        for token in tokenize(text):
            totals[token] = totals.get(token, 0) + weight
    return totals
