"""``tool-index verify``: recompute the index from the tool records and compare with what is stored.

Every check reads the same snapshot and appends what disagrees to one ``VerifyReport``:

1. ``check_postings`` — each tool's stored record, indexed again (``discovery._catalog.indexing``), gives
   its stored group, length, content hash and postings, term by term, in both places postings
   are kept: the tool's own indexed terms (tf) and the term index, blocks with their overrides
   applied (tf, and the length and group each posting copies from its tool); no posting belongs
   to a tool that does not exist.
2. ``check_group_stats`` — ``doc_count`` and ``total_len`` of every group equal a ``GROUP BY``
   over the tools.
3. ``check_term_stats`` — ``df`` and ``max_tf`` of every ``(term, group)`` equal those counted
   over the term index.
4. ``check_orphan_terms`` — every term has postings.
5. ``check_session_logs`` — replaying each session's log gives its stored lists.
6. ``check_learned_field`` — with learning on, the credits are those the logs give by the
   learning rule, and the learned postings and lengths are their sums; with it off, nothing is
   stored of the learned field.

Before them, ``check_catalog_state`` finds the catalog's one row, ``check_stored_values`` every
value that cannot be read back (JSON that is not JSON, a time that is not a time, session
settings outside their allowed values) and ``check_block_sizes`` every block whose size is not
the number of postings it holds. A check that meets data it cannot read stops and says so.

Tool records are re-indexed in batches; the term index is read whole (24 bytes a posting). A new
invariant is one more function appended to ``CHECKS``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError

from discovery._catalog.indexing import indexed_tool
from discovery._catalog.models import ToolRecord
from discovery._index import ToolIndex
from discovery._params import stored_analyzer_named
from discovery._rules import replay, session_named
from discovery._sessions.learning import credits_from_logs
from discovery._sessions.settings import stored_settings
from discovery._text.analyzers import Analyzer
from discovery.errors import AnalyzerOutdated, CorruptIndex, UnknownAnalyzer, describe_validation_error
from store import GROUPS, AuditedTool, GroupStats, Reader, StoredPosting, StoredTool

GROUP_NAMES = {GROUPS.fixed: "fixed", GROUPS.local: "local", GROUPS.mcp: "mcp"}
MAX_PROBLEMS = 1000
"""Problems listed in a report; the rest are counted, so a wrecked index cannot exhaust memory."""
BATCH_SIZE = 1000
"""Tool rows re-indexed per batch (the term index is read whole: 24 bytes per posting)."""


@dataclass
class VerifyReport:
    """What ``verify`` found: ``problems`` (one line each, empty when the index is sound) and how
    many rows of each kind it ``checked``."""

    problems: list[str] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)
    omitted: int = 0
    """Problems found beyond ``MAX_PROBLEMS`` and not listed."""

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def found(self) -> int:
        """Every problem found, listed or not."""
        return len(self.problems) + self.omitted

    def problem(self, message: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(message)
        else:
            self.omitted += 1

    def count(self, what: str, number: int) -> None:
        self.checked[what] = self.checked.get(what, 0) + number


Check = Callable[[Reader, VerifyReport], None]
"""One invariant: reads through the reader (the shared snapshot) and reports what breaks it."""


def verify(index: ToolIndex, *, checks: Sequence[Check] | None = None) -> VerifyReport:
    """Run ``checks`` (default: ``CHECKS``) on one snapshot of ``index``'s database."""
    report = VerifyReport()
    with index.store.reading() as reader:
        for check in CHECKS if checks is None else checks:
            try:
                check(reader, report)
            except CorruptIndex as exc:  # data the check cannot even read: that is its finding
                report.problem(f"{check.__name__} could not finish: {exc.what}")
    return report


def check_postings(reader: Reader, report: VerifyReport) -> None:
    """Each tool's postings, length, group and content hash are those its record gives, both in
    its indexed terms and in the term index."""
    name = reader.catalog.analyzer()
    try:
        analyzer = stored_analyzer_named(name)
    except UnknownAnalyzer:
        report.problem(f"catalog_state: analyzer {name!r} is not one this tool-index knows")
        return
    except AnalyzerOutdated as exc:
        report.problem(f"catalog_state: {exc}")
        return
    indexed = reader.audit.catalog_postings()
    seen = 0
    report.count("tools", 0)
    for batch in reader.audit.tool_batches(batch_size=BATCH_SIZE, indexed=indexed):
        report.count("tools", len(batch))
        for tool in batch:
            seen += len(tool.held[0])
            for message in _tool_problems(tool, analyzer):
                report.problem(message)
    report.count("postings", int(indexed.size))
    if indexed.size != seen:
        report.problem(f"{indexed.size - seen} postings belong to no catalog tool")


def _tool_problems(audited: AuditedTool, analyzer: Analyzer) -> Iterator[str]:
    tool = audited.tool
    where = f"tool {tool.name!r}"
    try:
        record = ToolRecord.model_validate(tool.as_record())
    except ValidationError as exc:
        yield f"{where}: its stored record is invalid: {describe_validation_error(exc)}"
        return
    expected = indexed_tool(record, analyzer)
    if tool.grp != expected.row.grp:
        yield f"{where}: stored group {tool.grp}, its record belongs to group {expected.row.grp}"
    if tool.doc_len != expected.row.doc_len:
        yield f"{where}: stored doc_len {tool.doc_len}, its record gives {expected.row.doc_len}"
    if audited.content_hash != expected.row.content_hash:
        yield f"{where}: stored content hash does not match its record"
    # Most tools match exactly: compare whole term maps first, and list the differences posting
    # by posting only for a tool whose maps differ.
    if audited.terms_listed() != expected.terms:
        yield from _posting_problems(f"{where}, indexed terms", tool, expected.terms, audited.postings)
    if audited.terms_held() != expected.terms:
        yield from _posting_problems(f"{where}, term index", tool, expected.terms, audited.indexed)


def _posting_problems(
    where: str, tool: StoredTool, expected: Mapping[str, int], held: list[StoredPosting]
) -> Iterator[str]:
    stored: dict[str, StoredPosting] = {}
    for posting in held:
        if posting.term is None:
            yield f"{where}: a posting refers to term id {posting.term_id}, which has no terms row"
        elif posting.term in stored:
            yield f"{where}: term {posting.term!r} has more than one posting"
        else:
            stored[posting.term] = posting
    for term in sorted(expected.keys() | stored.keys()):
        want, have = expected.get(term), stored.get(term)
        if have is None:
            yield f"{where}: posting of term {term!r} is missing (its record gives tf {want})"
        elif want is None:
            yield f"{where}: posting of term {term!r} (tf {have.tf}) is not in its record"
        else:
            if have.tf != want:
                yield f"{where}, term {term!r}: stored tf {have.tf}, its record gives {want}"
            if have.doc_len != tool.doc_len:
                yield f"{where}, term {term!r}: posting doc_len {have.doc_len}, the tool's is {tool.doc_len}"
            if have.grp != tool.grp:
                yield f"{where}, term {term!r}: posting group {have.grp}, the tool's is {tool.grp}"


def check_catalog_state(reader: Reader, report: VerifyReport) -> None:
    """The one ``catalog_state`` row, which every search reads first, is there."""
    rows = reader.audit.row_count("catalog_state")
    if rows != 1:
        report.problem(f"catalog_state holds {rows} rows; it must hold exactly one (id 1)")


def check_stored_values(reader: Reader, report: VerifyReport) -> None:
    """Every stored JSON value and time reads back, and every session's settings are settings.

    PostgreSQL's column types refuse such values; SQLite keeps whatever text it is given."""
    for message in reader.audit.unreadable_tool_values():
        report.problem(message)
    for message in reader.sessions.unreadable():
        report.problem(message)
    for key, settings in reader.sessions.stored_settings():
        if not isinstance(settings, dict):
            continue  # reported above as unreadable
        try:
            stored_settings(key.id, settings)
        except CorruptIndex as exc:
            report.problem(exc.what)


def check_block_sizes(reader: Reader, report: VerifyReport) -> None:
    """Each posting block's ``size`` is the number of postings it holds, and its ``widths`` a
    layout of ``store._postings.LAYOUTS``."""
    for term_id, grp, size, held in reader.audit.block_size_mismatches(limit=MAX_PROBLEMS):
        report.problem(
            f"posting block of term id {term_id}, group {grp}: size {size}, it holds {held} postings"
        )
    for term_id, grp, widths in reader.audit.unknown_block_layouts(limit=MAX_PROBLEMS):
        report.problem(f"posting block of term id {term_id}, group {grp}: unknown widths {widths}")


def check_group_stats(reader: Reader, report: VerifyReport) -> None:
    """Per group, the stored document count and total length are those of the tool rows."""
    actual = reader.audit.group_totals()
    stored = reader.audit.stored_group_stats()
    groups = sorted(set(GROUPS) | actual.keys() | stored.keys())
    report.count("groups", len(groups))
    for grp in groups:
        where = f"group {grp} ({GROUP_NAMES.get(grp, 'unknown')})"
        have, want = stored.get(grp), actual.get(grp, GroupStats(0, 0))
        if have is None:
            report.problem(f"{where}: no group_stats row (the catalog has {want.doc_count} tools there)")
            continue
        if have.doc_count != want.doc_count:
            report.problem(f"{where}: stored doc_count {have.doc_count}, the catalog has {want.doc_count}")
        if have.total_len != want.total_len:
            report.problem(
                f"{where}: stored total_len {have.total_len}, its tools' lengths sum to {want.total_len}"
            )


def check_term_stats(reader: Reader, report: VerifyReport) -> None:
    """Per term and group, the stored df and max_tf are those of the postings."""
    report.count("term_stats", reader.audit.row_count("term_stats"))
    indexed = reader.audit.catalog_postings()
    for mismatch in reader.audit.term_stat_mismatches(limit=MAX_PROBLEMS, indexed=indexed):
        term = repr(mismatch.term) if mismatch.term is not None else f"id {mismatch.term_id} (no terms row)"
        where = f"term {term} in group {mismatch.grp}"
        have, want = mismatch.stored, mismatch.actual
        if have is None:
            assert want is not None
            report.problem(
                f"{where}: no term_stats row, its postings give df {want.df}, max_tf {want.max_tf}"
            )
        elif want is None:
            report.problem(
                f"{where}: term_stats holds df {have.df}, max_tf {have.max_tf} but it has no postings"
            )
        else:
            if have.df != want.df:
                report.problem(f"{where}: stored df {have.df}, its postings give {want.df}")
            if have.max_tf != want.max_tf:
                report.problem(f"{where}: stored max_tf {have.max_tf}, its postings give {want.max_tf}")


def check_orphan_terms(reader: Reader, report: VerifyReport) -> None:
    """Every term is used by a posting (writes drop the terms they leave unused)."""
    report.count("terms", reader.audit.row_count("terms"))
    indexed = reader.audit.catalog_postings()
    for term_id, text in reader.audit.orphan_terms(limit=MAX_PROBLEMS, indexed=indexed):
        report.problem(f"term {text!r} (id {term_id}) has no postings")


def check_session_logs(reader: Reader, report: VerifyReport) -> None:
    """Replaying each session's log gives its stored active and selected lists, without repeats."""
    states = reader.sessions.all(readable_only=True)
    report.count("sessions", len(states))
    report.count("session events", 0)
    for state in states:
        try:
            logged = reader.sessions.events(state.key)
        except CorruptIndex:
            continue  # an entry that cannot be read: check_stored_values names it
        report.count("session events", len(logged))
        active, selected = replay(logged)
        named = session_named(state.identity, state.id)
        if (active, selected) != (state.active, state.selected):
            report.problem(
                f"{named}: its log replays to active {active}, selected {selected}; "
                f"stored active {state.active}, selected {state.selected}"
            )
        if len(set(state.selected)) != len(state.selected):
            report.problem(f"{named}: a tool is selected twice: {state.selected}")
        if [entry.seq for entry in logged] != list(range(1, len(logged) + 1)):
            report.problem(f"{named}: its log has gaps in its sequence numbers")


def check_learned_field(reader: Reader, report: VerifyReport) -> None:
    """The learned field is what the session logs teach, per identity and session, summed
    (``discovery._sessions.learning``): sessions and distinct identities per (term, tool)."""
    state = reader.learning.state()
    stored = reader.learning.credits()
    term_sums, lengths = reader.learning.sums()
    report.count("learned credits", len(stored))
    if not state.enabled:
        if stored or term_sums or lengths:
            report.problem("learning is off, yet the learned field holds rows")
        return
    try:
        analyzer = stored_analyzer_named(reader.catalog.analyzer())
    except (UnknownAnalyzer, AnalyzerOutdated):
        return  # check_postings names it
    expected = credits_from_logs(reader, analyzer)
    for identity, session_id, term, tool in sorted(expected - stored)[:MAX_PROBLEMS]:
        report.problem(
            f"learned field: {session_named(identity, session_id)} taught {term!r} to {tool!r}, not stored"
        )
    for identity, session_id, term, tool in sorted(stored - expected)[:MAX_PROBLEMS]:
        report.problem(
            f"learned field: {term!r} is credited to {tool!r} by {session_named(identity, session_id)}, "
            "which its log does not teach"
        )
    counted: Counter[tuple[str, str]] = Counter((term, tool) for _, _, term, tool in stored)
    teachers = Counter((term, tool) for _, term, tool in {(who, term, tool) for who, _, term, tool in stored})
    for key in sorted(set(counted) | set(term_sums)):
        found = (counted.get(key, 0), teachers.get(key, 0))
        if found != term_sums.get(key, (0, 0)):
            sessions, identities = term_sums.get(key, (0, 0))
            report.problem(
                f"learned field: {key[0]!r} of {key[1]!r} is stored as taught by {sessions} sessions "
                f"of {identities} identities, its credits say {found[0]} of {found[1]}"
            )
    summed: Counter[str] = Counter()
    for (_, tool), count in counted.items():
        summed[tool] += count
    for tool in sorted(set(summed) | set(lengths)):
        if summed.get(tool, 0) != lengths.get(tool, 0):
            report.problem(
                f"learned field: {tool!r} has stored length {lengths.get(tool, 0)}, "
                f"its credits add up to {summed.get(tool, 0)}"
            )


CHECKS: list[Check] = [
    check_catalog_state,
    check_stored_values,
    check_block_sizes,
    check_postings,
    check_group_stats,
    check_term_stats,
    check_orphan_terms,
    check_session_logs,
    check_learned_field,
]
"""What ``verify`` runs by default, in order; append a check to extend it."""
