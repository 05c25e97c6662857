"""Evaluate an index's own search against a file of labelled queries.

A query file is JSONL, one query a line (blank lines are skipped)::

    {"query": "open a pull request", "relevant": ["mcp__github__create_pull_request"]}
    {"query": "read a file", "relevant_groups": [["mcp__filesystem__read_text_file",
                                                  "mcp__desktop-commander__read_file"]]}

``relevant`` names tools that are each to be found; ``relevant_groups`` names groups of which any
one tool will do (see ``discovery._quality.metrics``). Every search is the index's read-only
``ToolIndex.search`` in the given mode, so nothing in the database changes. Another analyzer than
the index's is evaluated on a copy of its catalog built with that analyzer in a temporary file.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from discovery._files import bounded_lines, invalid_reason, loads, read_bounded
from discovery._params import checked_identity
from discovery._quality.metrics import mean, ndcg_at, recall_at, reciprocal_rank, satisfied_at
from discovery._rules import LOCAL_IDENTITY
from discovery.errors import QueryWithoutTerms, StoreError, ToolIndexError

if TYPE_CHECKING:
    from discovery._index import ToolIndex

RANK_DEPTH = 100
"""How deep a miss's relevant tools are looked for, to say where they ranked."""


class QueryFileError(ToolIndexError):
    """A labelled query file cannot be used; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class LabelledQuery:
    """One line of a query file: the query and the groups of tools that answer it."""

    where: str
    """``<file>:<line>``, for messages."""
    query: str
    groups: tuple[tuple[str, ...], ...]

    @property
    def names(self) -> list[str]:
        """Every relevant name, in the order of the file, once."""
        return list(dict.fromkeys(name for group in self.groups for name in group))


@dataclass(frozen=True, slots=True)
class Miss:
    """A query with a group none of the first ``k`` results satisfied."""

    where: str
    query: str
    ranks: dict[str, int | None]
    """Each relevant name's 1-based rank in the first ``RANK_DEPTH`` results, or ``None``."""
    matched: int
    """How many tools the search matched at all, up to ``RANK_DEPTH``."""


@dataclass(frozen=True, slots=True)
class Evaluation:
    """Mean metrics over a query file; ``mrr`` is over the first ``max(ks)`` results."""

    queries: int
    ks: tuple[int, ...]
    recall: dict[int, float]
    mrr: float
    ndcg: dict[int, float]
    misses: list[Miss]

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` object: ``queries``, ``recall@<k>``…, ``mrr``, ``ndcg@<k>``…, ``misses``."""
        result: dict[str, Any] = {"queries": self.queries}
        result.update({f"recall@{k}": self.recall[k] for k in self.ks})
        result["mrr"] = self.mrr
        result.update({f"ndcg@{k}": self.ndcg[k] for k in self.ks})
        result["misses"] = [
            {"where": miss.where, "query": miss.query, "ranks": miss.ranks, "matched": miss.matched}
            for miss in self.misses
        ]
        return result


def read_queries(path: Path) -> list[LabelledQuery]:
    """Every labelled query of ``path``; a bad line raises ``QueryFileError`` naming it."""
    where, text = read_bounded(path, QueryFileError, what="query file")
    lines = bounded_lines(text, where, QueryFileError, what="query")
    queries = [_labelled(f"{where}:{number}", line) for number, line in lines]
    if not queries:
        raise QueryFileError(f"{path}: no queries in the file")
    return queries


def _row(where: str, line: str) -> Any:
    """One line of a query or training file as JSON, or ``QueryFileError`` saying why it is not."""
    try:
        return loads(line)
    except json.JSONDecodeError as exc:
        raise QueryFileError(f"{where}: not JSON: {exc.msg} (column {exc.colno})") from exc
    except ValueError as exc:  # NaN, or an integer too long to convert
        raise QueryFileError(f"{where}: not JSON: {invalid_reason(exc)}") from None
    except RecursionError:
        raise QueryFileError(f"{where}: JSON nested too deeply") from None


def _request(where: str, line: str, keys: set[str]) -> tuple[dict[str, Any], str]:
    """A line that is a JSON object of ``keys`` with a non-empty ``query``: the object and the
    query trimmed."""
    row = _row(where, line)
    if not isinstance(row, dict):
        raise QueryFileError(f"{where}: expected a JSON object")
    unknown = sorted(set(row) - keys)
    if unknown:
        raise QueryFileError(f"{where}: unknown key {_quoted(unknown[0])}")
    query = row.get("query")
    if not isinstance(query, str) or not query.strip():
        raise QueryFileError(f'{where}: "query" must be a non-empty string')
    return row, query.strip()


def _labelled(where: str, line: str) -> LabelledQuery:
    row, query = _request(where, line, {"query", "relevant", "relevant_groups"})
    return LabelledQuery(where, query, _groups(where, row))


def _groups(where: str, row: dict[str, Any]) -> tuple[tuple[str, ...], ...]:
    if ("relevant" in row) == ("relevant_groups" in row):
        raise QueryFileError(f'{where}: give exactly one of "relevant" and "relevant_groups"')
    if "relevant" in row:
        names = row["relevant"]
        if not _names(names):
            raise QueryFileError(f'{where}: "relevant" must be a non-empty list of tool names')
        return tuple((name,) for name in dict.fromkeys(names))
    groups = row["relevant_groups"]
    if not isinstance(groups, list) or not groups or not all(_names(group) for group in groups):
        raise QueryFileError(
            f'{where}: "relevant_groups" must be a non-empty list of non-empty lists of tool names'
        )
    return tuple(tuple(dict.fromkeys(group)) for group in groups)


def _names(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) and v for v in value)


def _quoted(text: str) -> str:
    """A name from the file, quoted with every control and non-ASCII character escaped."""
    return json.dumps(text)


def evaluate(
    index: ToolIndex, queries: Sequence[LabelledQuery], ks: Sequence[int], *, mode: str = "all"
) -> Evaluation:
    """Run every query through ``index.search`` in ``mode`` and average the metrics at each k."""
    ks = tuple(sorted(set(ks)))
    if not ks or ks[0] < 1:
        raise ValueError("ks must hold positive integers")
    _check_names(index, queries)
    depth = max(ks[-1], RANK_DEPTH)
    recalls: dict[int, list[float]] = {k: [] for k in ks}
    ndcgs: dict[int, list[float]] = {k: [] for k in ks}
    reciprocal: list[float] = []
    misses: list[Miss] = []
    for labelled in queries:
        ranked = _ranked(index, labelled, depth, mode)
        top = ranked[: ks[-1]]
        for k in ks:
            recalls[k].append(recall_at(top, labelled.groups, k))
            ndcgs[k].append(ndcg_at(top, labelled.groups, k))
        reciprocal.append(reciprocal_rank(top, labelled.groups))
        if not all(0 < rank <= ks[-1] for rank in satisfied_at(top, labelled.groups)):
            misses.append(_miss(labelled, ranked))
    return Evaluation(
        queries=len(queries),
        ks=ks,
        recall={k: mean(values) for k, values in recalls.items()},
        mrr=mean(reciprocal),
        ndcg={k: mean(values) for k, values in ndcgs.items()},
        misses=misses,
    )


def _ranked(index: ToolIndex, labelled: LabelledQuery, depth: int, mode: str) -> list[str]:
    try:
        return [hit.name for hit in index.search(labelled.query, depth, mode=mode)]
    except QueryWithoutTerms as exc:
        raise QueryFileError(f"{labelled.where}: the query has no letter or number") from exc


def _check_names(index: ToolIndex, queries: Sequence[LabelledQuery]) -> None:
    """A relevant name the catalog lacks is a mistake in the file (or the wrong database)."""
    wanted = list(dict.fromkeys(name for labelled in queries for name in labelled.names))
    known = index.tools_by_names(wanted)
    for labelled in queries:
        for name in labelled.names:
            if name not in known:
                raise QueryFileError(f"{labelled.where}: no tool named {_quoted(name)} in the catalog")


def _miss(labelled: LabelledQuery, ranked: list[str]) -> Miss:
    position = {name: rank for rank, name in reversed(list(enumerate(ranked, start=1)))}
    return Miss(
        where=labelled.where,
        query=labelled.query,
        ranks={name: position.get(name) for name in labelled.names},
        matched=len(ranked),
    )


@dataclass(frozen=True, slots=True)
class TrainingRequest:
    """One line of a training file: a request searched, and the tools then called (maybe none:
    a request that found nothing useful, answered by the next line of the same session)."""

    where: str
    session: str
    query: str
    tools: tuple[str, ...]
    identity: str = LOCAL_IDENTITY
    """Whose session it is: learning counts what each identity taught."""


def read_training(path: Path) -> list[TrainingRequest]:
    """Every request of a training file (JSONL: ``{"query": ..., "tools": [names]}``, and
    ``"session": id`` to make several lines one session's searches and calls, in file order;
    each line is a session of its own otherwise; ``"identity": name`` makes it that identity's
    session, the local identity's otherwise). A bad line raises ``QueryFileError``."""
    where, text = read_bounded(path, QueryFileError, what="training file")
    lines = bounded_lines(text, where, QueryFileError, what="request")
    requests = [_training(f"{where}:{number}", number, line) for number, line in lines]
    if not requests:
        raise QueryFileError(f"{path}: no requests in the file")
    return requests


def _training(where: str, number: int, line: str) -> TrainingRequest:
    row, query = _request(where, line, {"query", "tools", "session", "identity"})
    tools = row.get("tools", [])
    if not isinstance(tools, list) or not all(isinstance(name, str) and name for name in tools):
        raise QueryFileError(f'{where}: "tools" must be a list of tool names')
    session = row.get("session", f"line-{number}")
    if not isinstance(session, str) or not session:
        raise QueryFileError(f'{where}: "session" must be a non-empty string')
    try:
        identity = checked_identity(row.get("identity", LOCAL_IDENTITY))
    except ToolIndexError as exc:
        raise QueryFileError(f'{where}: "identity": {exc}') from None
    return TrainingRequest(where, session, query, tuple(dict.fromkeys(tools)), identity)


def learn_from(index: ToolIndex, requests: Sequence[TrainingRequest], *, answer: str = "contract") -> None:
    """Play ``requests`` into ``index`` as sessions would: each session (its identity's) searches
    its requests and records its calls, in file order (its searches answered in the ``answer``
    style); then learning is turned on, which learns from the logs."""
    known = index.tools_by_names(list(dict.fromkeys(name for request in requests for name in request.tools)))
    for request in requests:
        for name in request.tools:
            if name not in known:
                raise QueryFileError(f"{request.where}: no tool named {_quoted(name)} in the catalog")
    sessions: dict[tuple[str, str], list[TrainingRequest]] = {}
    for request in requests:
        sessions.setdefault((request.identity, request.session), []).append(request)
    for number, ((identity, session_id), played) in enumerate(sessions.items()):
        session = index.session(
            f"learn-{number}-{session_id}", identity=identity, discovery_mode="all", answer=answer
        )
        for call, request in enumerate(played):
            try:
                session.search_tool.execute(f"learn-{call}", {"query": request.query, "limit": 1})
            except StoreError:
                raise  # the database failed, not the request
            except ToolIndexError as exc:
                raise QueryFileError(f"{request.where}: the request cannot be searched: {exc}") from exc
            for name in request.tools:
                session.record_call(name)
    index.set_learning(True)


def evaluate_with(
    index: ToolIndex,
    analyzer: str,
    queries: Sequence[LabelledQuery],
    ks: Sequence[int],
    *,
    mode: str = "all",
    learn: Sequence[TrainingRequest] = (),
) -> Evaluation:
    """``evaluate`` as if ``index`` were built with ``analyzer`` and had learned from ``learn``:
    the index itself when it is built so and nothing is to be learned, else a copy of its catalog
    in a temporary SQLite file (removed after), so ``index`` is only read."""
    from discovery._index import ToolIndex
    from discovery._params import analyzer_named

    analyzer_named(analyzer)
    if index.analyzer == analyzer and not learn:
        return evaluate(index, queries, ks, mode=mode)
    records = [tool.as_record() for tool in index.tools()]
    with (
        tempfile.TemporaryDirectory(prefix="tool-index-eval-") as directory,
        ToolIndex.open(str(Path(directory) / "catalog.db"), analyzer=analyzer) as copy,
    ):
        copy.upsert_tools(records)
        if learn:
            learn_from(copy, learn)
        return evaluate(copy, queries, ks, mode=mode)
