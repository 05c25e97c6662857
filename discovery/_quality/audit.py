"""Findability: can each tool be found with its own words, and which tools crowd the others out?

Every searchable tool gets up to three probe queries made of its own text: its name parts (the
MCP tool name when it has one), its summary, and its parameter names. Each probe is a read-only
``ToolIndex.search`` for the first ``k``. A tool none of whose probes brings it into the first
``k`` is **unfindable**: a model asking in the tool's own words would not get it. A tool in the
first ``k`` of the probes of many *other* tools is a **hub**: it crowds their results.

For each, the terms responsible: an unfindable tool's probe terms that most other tools share
(the words it is asked for are everywhere), a hub's terms found most often in the probes it took.

Then the poisoning alarm of learning (``learning_alarm``): tools whose learned field comes from
few identities but many sessions, or far outnumbers their own text's terms.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from discovery._params import analyzer_named
from discovery._rules import read_only_corpus
from discovery._text.analyzers import REFERENCE, Analyzer
from discovery._text.tokenizer import tokenize

if TYPE_CHECKING:
    from discovery._index import ToolIndex
    from discovery._quality.learning_alarm import LearningAlarm
    from store import StoredTool

HUB_SHARE = 0.05
"""A hub reaches the first k for the probes of more than this share of the other tools…"""
HUB_MIN_TOOLS = 3
"""…and of at least this many…"""
HUB_OVER_MEAN = 2.0
"""…and of more than this many times the tools whose probes reach the average tool: a tool's few
probes each fill k places, so in a small catalog every tool is reached by a large share of the
others by chance, and the share alone would call nearly every tool a hub."""
SHOWN_TERMS = 3
"""Terms, and crowding tools, listed per finding."""


@dataclass(frozen=True, slots=True)
class Probe:
    tool: str
    kind: str
    """``name``, ``summary`` or ``parameters``."""
    query: str


@dataclass(frozen=True, slots=True)
class Unfindable:
    name: str
    probes: list[Probe]
    common_terms: list[tuple[str, int]]
    """The terms of its probes with the number of other tools that have them, most shared first."""
    crowded_by: list[tuple[str, int]]
    """The tools most often in the first k of its probes, with how many of its probes they took."""


@dataclass(frozen=True, slots=True)
class Hub:
    name: str
    tools_reached: int
    """Other tools whose probes put this one in the first k."""
    terms: list[tuple[str, int]]
    """Its own terms found most often in those probes, with the count."""


@dataclass(frozen=True, slots=True)
class AuditReport:
    k: int
    mode: str
    tools: int
    """Searchable tools in the mode (each was probed)."""
    probes: int
    unfindable: list[Unfindable]
    hubs: list[Hub]
    learning: list[LearningAlarm] = field(default_factory=list)
    """What the poisoning alarm names (``learning_alarm``)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "mode": self.mode,
            "tools": self.tools,
            "probes": self.probes,
            "unfindable": [
                {
                    "name": tool.name,
                    "probes": [{"kind": probe.kind, "query": probe.query} for probe in tool.probes],
                    "common_terms": [{"term": t, "tools": n} for t, n in tool.common_terms],
                    "crowded_by": [{"name": name, "probes": n} for name, n in tool.crowded_by],
                }
                for tool in self.unfindable
            ],
            "hubs": [
                {
                    "name": hub.name,
                    "tools_reached": hub.tools_reached,
                    "terms": [{"term": t, "probes": n} for t, n in hub.terms],
                }
                for hub in self.hubs
            ],
            "learning": [alarm.as_dict() for alarm in self.learning],
        }


def searchable(tools: Iterable[StoredTool], mode: str) -> list[StoredTool]:
    """The tools a read-only search in ``mode`` ranks (contract §5: no essential or internal names)."""
    corpus = read_only_corpus(mode)
    return [tool for tool in tools if tool.grp in corpus.groups and tool.name not in corpus.excluded]


def probes_of(tool: StoredTool) -> list[Probe]:
    """The tool's own-words queries; a part with no letter or number gives none."""
    name = tool.mcp_tool_name or tool.name
    candidates = [
        ("name", " ".join(tokenize(name))),
        ("summary", " ".join(tool.summary.split())),
        ("parameters", " ".join(" ".join(tokenize(key)) for key in tool.schema_keys)),
    ]
    return [Probe(tool.name, kind, query) for kind, query in candidates if tokenize(query)]


def own_terms(tool: StoredTool, analyzer: Analyzer = REFERENCE) -> set[str]:
    """Every term of the tool's indexed fields, as ``analyzer`` indexes them."""
    texts = [tool.name, tool.label, tool.mcp_tool_name or "", tool.server_name or "", tool.summary]
    return {term for text in [*texts, *tool.schema_keys] for term in analyzer.document_tokens(text)}


def audit(index: ToolIndex, *, k: int = 5, mode: str = "all") -> AuditReport:
    """Probe every searchable tool of ``index`` and report the unfindable ones and the hubs."""
    tools = searchable(index.tools(), mode)
    # The terms responsible are the index's own: under a stemming analyzer a probe meets another
    # tool through a shared stem, and the query stop words it drops are responsible for nothing.
    analyzer = analyzer_named(index.analyzer)
    terms = {tool.name: own_terms(tool, analyzer) for tool in tools}
    document_frequency: Counter[str] = Counter(term for own in terms.values() for term in own)
    found: set[str] = set()
    ahead: dict[str, Counter[str]] = {tool.name: Counter() for tool in tools}
    reached: dict[str, set[str]] = {}
    hub_terms: dict[str, Counter[str]] = {}
    probes = {tool.name: probes_of(tool) for tool in tools}
    for probe in (probe for own in probes.values() for probe in own):
        names = [hit.name for hit in index.search(probe.query, k, mode=mode)]
        if probe.tool in names:
            found.add(probe.tool)
        query_terms = set(analyzer.query_tokens(probe.query))
        for other in (name for name in names if name != probe.tool):
            ahead[probe.tool][other] += 1
            reached.setdefault(other, set()).add(probe.tool)
            hub_terms.setdefault(other, Counter()).update(query_terms & terms.get(other, set()))
    unfindable = [
        Unfindable(
            name=tool.name,
            probes=probes[tool.name],
            common_terms=sorted(
                ((term, document_frequency[term] - 1) for term in _probe_terms(probes[tool.name], analyzer)),
                key=lambda item: (-item[1], item[0]),
            )[:SHOWN_TERMS],
            crowded_by=ahead[tool.name].most_common(SHOWN_TERMS),
        )
        for tool in tools
        if tool.name not in found
    ]
    by_chance = sum(map(len, reached.values())) / len(tools) if tools else 0.0
    threshold = max(HUB_MIN_TOOLS, HUB_SHARE * (len(tools) - 1), HUB_OVER_MEAN * by_chance)
    hubs = [
        Hub(name, len(others), hub_terms[name].most_common(SHOWN_TERMS))
        for name, others in reached.items()
        if len(others) >= threshold
    ]
    hubs.sort(key=lambda hub: (-hub.tools_reached, hub.name))
    from discovery._quality.learning_alarm import learning_alarms

    with index.store.reading() as reader:
        alarms = learning_alarms(reader)
    return AuditReport(k, mode, len(tools), sum(map(len, probes.values())), unfindable, hubs, alarms)


def _probe_terms(probes: Iterable[Probe], analyzer: Analyzer) -> set[str]:
    return {term for probe in probes for term in analyzer.query_tokens(probe.query)}
