"""The document model of contract §4: which fields a tool is indexed by, and their weights.

A tool's term frequencies are weighted sums: each token occurrence adds its field's weight.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from discovery._text.analyzers import REFERENCE, Analyzer

FIELD_WEIGHTS: Mapping[str, int] = {
    "name": 6,
    "label": 4,
    "mcp_tool_name": 4,
    "server_name": 2,
    "summary": 2,
    "schema_key": 1,
}
"""Each token occurrence in a field adds that field's weight to the term frequency [fixed]."""


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


def field_term_frequencies(
    pairs: Iterable[tuple[str, str]], analyzer: Analyzer = REFERENCE
) -> dict[str, dict[str, int]]:
    """Weighted term frequencies per field: ``{field: {term: weight · occurrences}}``."""
    terms_of = analyzer.document_tokens
    per_field: dict[str, dict[str, int]] = {}
    for field, text in pairs:
        weight = FIELD_WEIGHTS[field]
        bucket = per_field.setdefault(field, {})
        for token in terms_of(text):
            bucket[token] = bucket.get(token, 0) + weight
    return per_field


def document_term_frequencies(
    pairs: Iterable[tuple[str, str]], analyzer: Analyzer = REFERENCE
) -> dict[str, int]:
    """Weighted term frequencies of a whole document; their sum is the document length."""
    terms_of = analyzer.document_tokens
    totals: dict[str, int] = {}
    for field, text in pairs:
        weight = FIELD_WEIGHTS[field]
        for token in terms_of(text):
            totals[token] = totals.get(token, 0) + weight
    return totals


LEARNED_WEIGHT = 0.5
"""What the learned field's BM25+ score counts for beside the tool's own text: the field is scored
as a document of its own (the corpus' ``N``, no length normalisation) and added at this weight
(measured: bench/results.md, "Learning from use")."""
