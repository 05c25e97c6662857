"""The answer a model can act on: ``search_tool_bm25`` in a session whose ``answer`` is ``rich``.

Contract §6's answer names the newly activated tools and nothing else. This one lists, in rank
order, the tools that match the request better than by common words alone (up to ``limit``),
those already active included and marked, each with one line of its description and its
required arguments; it activates only those, so a search nothing answers activates nothing, and
a repeated search activates nothing new. The ranking is the session's mode's whole corpus, active
tools included, so the same request names the same tools however often it is asked. Three query
forms ask precisely (the syntax of Claude Code's tool search):

- ``select:NAME[,NAME…]`` activates exactly the named tools (full names, ``server/tool`` labels
  or a server's own tool names), no ranking;
- ``+WORD rest`` keeps to tools whose server or own name has the word ``WORD`` and ranks them by
  ``rest`` (the statistics stay the whole corpus');
- a query written as a tool's name, label or MCP name of more than one word (``find_symbol``,
  ``serena/find_symbol``, ``mcp__serena__find_symbol``) asks for that tool alone, as
  ``select:find_symbol`` does: the tools that share its words are not what was asked for;
- a query whose words spell a name (``find symbol``) ranks that tool first.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from discovery._params import Query, searched_query
from discovery._results import MatchDetails, match_details
from discovery._rules import Corpus, activation_order
from discovery._text.enhanced import ENGLISH_STOP_WORDS
from discovery._text.tokenizer import tokenize

if TYPE_CHECKING:
    from discovery._ranking.ranker import Ranker
    from discovery._ranking.topk import RankedTool
    from store import Reader, StoredTool

SELECT_PREFIX = "select:"
REQUIRE_PREFIX = "+"

COMMON_TERM_SHARE = 0.5
"""A query term held by at least this share of the corpus' tools is a common one (idf ≤ ln 2),
as is an English stop word whatever its share; a tool that matches a request through such terms
only is not activated (the command line flags the same matches as weak)."""

COMMON_TERM_MIN_TOOLS = 10
"""The share says nothing in a corpus smaller than this: one server's handful of tools all hold
the server's own word (``time`` in a time server's two tools), which is just what a request for
them names. Below it only stop words are common. The labelled sets' corpora are far larger, so
their figures do not depend on it."""


def is_common(term: str, df: int, n_docs: int) -> bool:
    """Whether a query term matches too widely to make a match sure: a stop word, or a term held
    by at least ``COMMON_TERM_SHARE`` of a corpus of ``COMMON_TERM_MIN_TOOLS`` tools or more."""
    if term in ENGLISH_STOP_WORDS:
        return True
    return n_docs >= COMMON_TERM_MIN_TOOLS and df >= COMMON_TERM_SHARE * n_docs


SURE_SHARE = 0.2
"""A tool is activated only when its score is at least this share of the best score of the
search: below it, a match is a tail of partial overlaps. Chosen on the labelled query sets
(``bench/activation.py``): the highest share that loses no right tool the plain ranking puts in
the top five on one set, checked on the other."""

DESCRIPTION_CHARS = 120
"""The longest description line an answer carries (a tool's first line or sentence, cut)."""

HINT_SERVERS = 24
"""At most this many servers are named in the hint of an answer with no tool."""

ECHO_CHARS = 200
"""The longest query, or unknown name, an answer repeats (cut with an ellipsis): the model
wrote it, and a megabyte request would come back whole into its context."""

UNKNOWN_LISTED = 24
"""At most this many of the names ``select:`` did not find are listed; the answer counts the rest."""


@dataclass(frozen=True, slots=True)
class QueryForm:
    """What a query asks: ``names`` to select, or ``words`` to rank, kept to tools that have
    ``required`` in their server or own name when it is set."""

    words: str
    names: tuple[str, ...] | None = None
    required: tuple[str, ...] = ()


def names_tools(query: str) -> bool:
    """Whether a trimmed query is ``select:``, which names tools rather than a need."""
    return query[: len(SELECT_PREFIX)].lower() == SELECT_PREFIX


def query_form(query: str) -> QueryForm:
    """The form of a trimmed query (the module's docstring lists them)."""
    if names_tools(query):
        names = tuple(dict.fromkeys(name.strip() for name in query[len(SELECT_PREFIX) :].split(",")))
        return QueryForm(words=query, names=tuple(name for name in names if name))
    first, _, rest = query.partition(" ")
    if first.startswith(REQUIRE_PREFIX) and tokenize(first):
        return QueryForm(words=rest.strip() or first[1:], required=tuple(tokenize(first)))
    return QueryForm(words=query)


@dataclass(frozen=True, slots=True)
class NameIndex:
    """Every catalog tool by the names a model may know it by, as words: its full name, its
    ``server/tool`` label and its server's own name for it (so ``find symbol``, ``find_symbol``
    and ``serena/find_symbol`` all say ``find_symbol``); and the words of each tool's server and
    own name, which ``+WORD`` keeps to."""

    by_words: dict[str, tuple[str, ...]]
    own_words: dict[str, frozenset[str]]
    by_spelling: dict[str, tuple[str, ...]]
    """The tools by each name, label and MCP name as written (lower case)."""

    @classmethod
    def of(cls, origins: Sequence[tuple[str, str | None, str | None]]) -> NameIndex:
        by_words: dict[str, list[str]] = {}
        own_words: dict[str, frozenset[str]] = {}
        by_spelling: dict[str, list[str]] = {}
        for name, server, tool in origins:
            spellings = {name} if tool is None else {name, tool, f"{server}/{tool}"}
            for spelling in spellings:
                key = " ".join(tokenize(spelling))
                if key:
                    by_words.setdefault(key, []).append(name)
                by_spelling.setdefault(spelling.lower(), []).append(name)
            own = tokenize(tool) if tool is not None else tokenize(name)
            own_words[name] = frozenset([*own, *tokenize(server or "")])
        return cls(
            {key: tuple(names) for key, names in by_words.items()},
            own_words,
            {spelling: tuple(dict.fromkeys(names)) for spelling, names in by_spelling.items()},
        )

    def named(self, text: str) -> tuple[str, ...]:
        """The tools ``text`` names exactly (an exact full name first), in catalog order."""
        if text in self.own_words:
            return (text,)
        return self.by_words.get(" ".join(tokenize(text)), ())

    def written_as_name(self, text: str) -> bool:
        """Whether ``text`` is a tool's name of more than one word as it is written (any case):
        ``read_text_file`` names a tool, where ``read text file`` or ``echo`` may describe a need."""
        return text.lower() in self.by_spelling and len(tokenize(text)) > 1

    def written(self, text: str) -> tuple[str, ...]:
        """The tools whose name, label or MCP name is ``text`` as written (any case)."""
        return self.by_spelling.get(text.lower(), ())

    def having(self, words: Collection[str], names: Collection[str]) -> list[str]:
        return [name for name in names if set(words) <= self.own_words.get(name, frozenset())]


@dataclass
class Answer:
    """A rich answer as it is built: the listed tools and what the model is told of the rest."""

    query: str
    listed: list[StoredTool] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)
    unavailable: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    note: str | None = None


@dataclass(frozen=True, slots=True)
class SearchContext:
    """What a rich search needs of its session and transaction."""

    reader: Reader
    ranker: Ranker
    whole: Corpus
    """The mode's corpus less the essential and internal tools: active and out-of-scope tools in."""
    active: frozenset[str]
    out_of_scope: frozenset[str]
    names: NameIndex


def answer_query(context: SearchContext, query: Query, limit: int) -> Answer:
    """The tools a rich search lists for ``query`` and what it says."""
    form = query_form(query.text)
    if form.names is not None:
        return _selected(context, query.text, form.names)
    if context.names.written_as_name(query.text):
        # Only the tools this session may see: one of a server it does not report stays unseen.
        named = [name for name in context.names.named(query.text) if name not in context.whole.excluded]
        if named:
            return _selected(context, query.text, named)
    # ``+WORD`` followed by no word ranks by the word itself.
    words = searched_query(form.words) if tokenize(form.words) else query
    answer = _ranked(context, query.text, form, words, limit)
    if form.required and not (answer.listed or answer.unavailable) and words is not query:
        # The rest matched none of the kept tools: rank them by the word too (``+time tokyo``).
        answer = _ranked(
            context, query.text, form, searched_query(f"{form.words} {' '.join(form.required)}"), limit
        )
    return answer


def _selected(context: SearchContext, query: str, names: Sequence[str]) -> Answer:
    answer = Answer(query)
    wanted: list[str] = []
    for name in names:
        found = context.names.named(name)
        if not found:
            answer.unknown.append(name)
        wanted += found
    documents = context.ranker.documents(context.reader, list(dict.fromkeys(wanted)))
    searchable = set(wanted) - _outside(context, documents.values())
    for name in dict.fromkeys(wanted):
        if name in searchable:
            answer.listed.append(documents[name])
        else:
            answer.unavailable.append(name)
    if not names:
        answer.note = "select: needs names, comma-separated: select:NAME[,NAME...]"
    return answer


def _outside(context: SearchContext, tools: Collection[StoredTool]) -> set[str]:
    """The tools a search may not activate: of another mode's group, essential or internal
    (all active anyway, so listed as active), or out of the session's scope."""
    return {
        tool.name
        for tool in tools
        if tool.name in context.out_of_scope
        or (tool.grp not in context.whole.groups and tool.name not in context.active)
    }


def _ranked(context: SearchContext, query: str, form: QueryForm, words: Query, limit: int) -> Answer:
    answer = Answer(query)
    reader, ranker = context.reader, context.ranker
    named = [name for name in context.names.named(words.text) if name not in context.whole.excluded]
    terms = ranker.query_terms(reader, words)
    # A kept word or a named tool takes places of the ranking: rank every match then.
    wide = bool(form.required or named)
    hits = ranker.rank(reader, terms, context.whole, None if wide else limit, query=words.text).hits
    if form.required:
        kept = set(context.names.having(form.required, [hit.name for hit in hits]))
        named = [name for name in named if name in context.names.having(form.required, named)]
        hits = [hit for hit in hits if hit.name in kept]
    top = hits[0].score if hits else 0.0
    sure = sure_hits(reader, ranker, terms, context.whole, hits[:limit], top)
    order = list(dict.fromkeys([*named, *(hit.name for hit in sure)]))[:limit]
    documents = ranker.documents(reader, order)
    outside = _outside(context, documents.values())
    answer.scores = {hit.name: hit.score for hit in hits}
    # When the scope leaves out the best match, what ranks below it could only stand in for it:
    # nothing is listed. One left out further down is reported, the others listed as usual.
    stand_ins = bool(order) and order[0] in outside
    for name in order:
        if name in outside:
            answer.unavailable.append(name)
        elif not stand_ins:
            answer.listed.append(documents[name])
    return answer


def sure_hits(
    reader: Reader,
    ranker: Ranker,
    terms: dict[str, int],
    corpus: Corpus,
    hits: Sequence[RankedTool],
    top: float,
    share: float = SURE_SHARE,
) -> list[RankedTool]:
    """The hits that match by more than common words and score at least ``share`` of ``top``
    (the best score of the search), in rank order."""
    weak = common_only(reader, ranker, terms, corpus, hits)
    return [hit for hit in hits if hit.tool_id not in weak and hit.score >= share * top]


def common_only(
    reader: Reader, ranker: Ranker, terms: dict[str, int], corpus: Corpus, hits: Sequence[RankedTool]
) -> set[int]:
    """The ids of the hits whose every matched query term is common in ``corpus``' groups (a
    ``is_common``). A hit that matched no
    term of its text (by a learned word or by meaning alone) is not among them."""
    if not hits:
        return set()
    groups = reader.index.group_stats()
    n_docs = sum(groups[g].doc_count for g in corpus.groups if g in groups)
    stats = reader.index.term_stats(list(terms))
    common = {
        term
        for term in terms
        if is_common(
            term, sum(s.df for g, s in stats.get(term, (0, {}))[1].items() if g in corpus.groups), n_docs
        )
    }
    postings = reader.index.postings_of_tools([hit.tool_id for hit in hits])
    weak = set()
    for hit in hits:
        matched = {p.term for p in postings.get(hit.tool_id, []) if p.term in terms}
        if matched and matched <= common:
            weak.add(hit.tool_id)
    return weak


def one_line(description: str) -> str:
    """A description's first line, to its first sentence, at most ``DESCRIPTION_CHARS`` long."""
    line = description.strip().split("\n", 1)[0].strip()
    end = line.find(". ")
    if end != -1:
        line = line[: end + 1]
    return line if len(line) <= DESCRIPTION_CHARS else line[: DESCRIPTION_CHARS - 1].rstrip() + "…"


def required_arguments(schema: dict[str, Any] | None) -> list[str]:
    """The names an input schema requires (those that are text, in its order)."""
    required = (schema or {}).get("required")
    if not isinstance(required, list):
        return []
    return [name for name in required if isinstance(name, str)]


def activated_by(answer: Answer, active: Collection[str]) -> list[str]:
    """What the answer activates: its listed tools not active yet, MCP tools first (contract §5)."""
    return activation_order([tool.name for tool in answer.listed if tool.name not in active])


def rich_content(answer: Answer, activated: list[str], active: Collection[str], total: int) -> dict[str, Any]:
    """The answer as the model reads it (compact JSON) and as ``structuredContent``."""
    tools = []
    for tool in answer.listed:
        entry: dict[str, Any] = {"name": tool.name}
        if tool.name in active:
            entry["active"] = True
        entry["description"] = one_line(tool.description)
        entry["required"] = required_arguments(tool.input_schema)
        tools.append(entry)
    content: dict[str, Any] = {
        "query": _echoed(answer.query),
        "activated_tools": activated,
        "tools": tools,
        "match_count": len(tools),
        "total_tools": total,
    }
    if answer.unavailable:
        content["unavailable"] = answer.unavailable
    if answer.unknown:
        content["unknown"] = [_echoed(name) for name in answer.unknown[:UNKNOWN_LISTED]]
    notes = [] if answer.note is None else [answer.note]
    if len(answer.unknown) > UNKNOWN_LISTED:
        notes.append(f"{len(answer.unknown) - UNKNOWN_LISTED} more names no tool has are not listed.")
    if notes:
        content["note"] = " ".join(notes)
    return content


def _echoed(text: str) -> str:
    return text if len(text) <= ECHO_CHARS else text[: ECHO_CHARS - 1] + "…"


def nothing_found(servers: Sequence[tuple[str, int]], builtins: Sequence[str]) -> str:
    """What an answer with no tool says: nothing was activated, and where to look instead."""
    if not servers and not builtins:
        return (
            "No tool can be searched here: this host offers none (no server's tools are indexed, "
            "or none is in its scope). Searching again will not find one."
        )
    places = [f"{server} ({count})" for server, count in servers[:HINT_SERVERS]]
    if len(servers) > HINT_SERVERS:
        places.append(f"{len(servers) - HINT_SERVERS} more")
    if builtins:
        places.append(f"{len(builtins)} built-in tools")
    where = f" Servers here: {', '.join(places)}." if places else ""
    return (
        "No tool matched more than common words, so none was activated. Try other words "
        "(what the tool does, or a server's name as +server words), or select:NAME." + where
    )


def listed_details(answer: Answer) -> list[MatchDetails]:
    """The listed tools as contract §6's match details (a selected tool's score is 0)."""
    return [match_details(tool, answer.scores.get(tool.name, 0.0)) for tool in answer.listed]
