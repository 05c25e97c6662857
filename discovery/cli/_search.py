"""Search commands: search (read-only or in a session) and explain."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import click

from discovery._index import read_only_details
from discovery._params import DEFAULT_LIMIT, checked_identity, checked_query, checked_search, searched_query
from discovery._ranking.bm25 import round6
from discovery._results import SearchDetails
from discovery._rules import LOCAL_IDENTITY, read_only_corpus
from discovery.cli._app import App, PositiveInt, echo, echo_json, example, pass_app, stdout_console
from discovery.cli._catalog import EMPTY_CATALOG
from discovery.cli._names import resolved_name
from discovery.cli._output import print_table
from discovery.cli._render import one_line, render_result
from discovery.errors import DiscoveryDisabled, ToolCallError
from store import Reader

if TYPE_CHECKING:
    from discovery._sessions.settings import SessionSettings
    from discovery._sessions.view import Scope


session_identity_option = click.option(
    "--identity",
    metavar="NAME",
    default="local",
    show_default=True,
    help=(
        "With --session: whose session ID is (ids are per identity). Without: whose learning the "
        "read-only search sees (its own at once, the others' once shared)."
    ),
)


@click.command(
    epilog=example(
        "tool-index search 'create issue' --limit 5",
        "tool-index search 'post a message' --mode mcp-only --json",
        "tool-index search 'open a pull request' --session chat-42 --mode all",
    )
)
@click.argument("query")
@click.option("--limit", type=PositiveInt(), default=DEFAULT_LIMIT, show_default=True, help="Most matches.")
@click.option(
    "--mode",
    type=click.Choice(["all", "mcp-only"]),
    default=None,
    help="Search every discoverable tool, or the MCP tools only [default: all; with --session, the "
    "mode of a new session, default auto].",
)
@click.option("--session", "session_id", metavar="ID", help="Run search_tool_bm25 in this session.")
@session_identity_option
@click.option(
    "--default-server",
    "default_servers",
    multiple=True,
    metavar="NAME",
    help=("New session: an MCP server whose tools stay active (repeatable)."),
)
@click.option(
    "--request",
    "requested",
    multiple=True,
    metavar="NAME",
    help=("New session: a tool to start active (repeatable)."),
)
@click.option(
    "--essential",
    "essential_override",
    multiple=True,
    metavar="NAME",
    help=("New session: replace the essential tool names (repeatable)."),
)
@click.option(
    "--answer",
    type=click.Choice(["contract", "rich"]),
    default=None,
    help="New session: how its searches answer (rich: the tools that match, with what they take).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the details object as one JSON document.")
@click.option("--expanded", is_flag=True, help="Show every match, not only the first five.")
@pass_app
def search(
    app: App,
    query: str,
    limit: int,
    mode: str | None,
    session_id: str | None,
    identity: str,
    default_servers: tuple[str, ...],
    requested: tuple[str, ...],
    essential_override: tuple[str, ...],
    answer: str | None,
    as_json: bool,
    expanded: bool,
) -> None:
    """Rank the catalog's tools for QUERY.

    Without --session: read-only, the whole catalog in MODE with nothing active. With --session:
    the search_tool_bm25 call of that session (created when new), which activates the matches
    and persists them.
    """
    if session_id is None:
        details, weak = _read_only_search(app, query, limit, mode or "all", identity, flag_weak=not as_json)
    else:
        settings = {
            "discovery_mode": mode,
            "default_servers": list(default_servers) or None,
            "requested": list(requested) or None,
            "essential_override": list(essential_override) or None,
            "answer": answer,
        }
        details, weak = _session_search(
            app, (identity, session_id), query, limit, settings, flag_weak=not as_json
        )
    if as_json:
        echo_json(details)
        return
    stdout_console().print(render_result(details, expanded=expanded, weak=weak))
    if session_id is None and details["total_tools"] == 0 and mode != "mcp-only":
        echo(EMPTY_CATALOG)


def _read_only_search(
    app: App, query: str, limit: int, mode: str, identity: str, *, flag_weak: bool
) -> tuple[SearchDetails, set[str]]:
    with app.index() as index:
        checked, limit = checked_search(query, limit)
        identity = checked_identity(identity)
        with index.store.reading() as reader:  # one snapshot for the matches and their flags
            details = read_only_details(reader, index.ranker, checked, limit, mode, identity)
            if not flag_weak:
                return details, set()
            from discovery._diagnostics.weak import weak_matches_in

            names = [match["name"] for match in details["tools"]]
            return details, weak_matches_in(
                reader, index.ranker, checked, names, mode=mode, identity=identity
            )


def _session_search(
    app: App,
    session: tuple[str, str],
    query: str,
    limit: int,
    settings: dict[str, Any],
    *,
    flag_weak: bool,
) -> tuple[SearchDetails, set[str]]:
    """One search_tool_bm25 call in the session of ``(identity, id)``; it is created with
    ``settings`` when it is new."""
    from discovery._diagnostics.weak import weak_matches_in
    from discovery._sessions.session import search_once

    given = {key: value for key, value in settings.items() if value is not None}
    call_id = f"cli-{uuid.uuid4().hex[:12]}"
    with app.index(create=True) as index:
        # One write: the session is created when new (settings given for an existing session
        # must match its own, else a clear error), searched, and the call logged.
        identity, session_id = session
        params = {"query": query, "limit": limit}
        done = search_once(index.store, index.ranker, session_id, given or None, call_id, params, identity)
        outcome, view = done.outcome, done.view
        with index.store.reading() as reader:  # and one read for what is shown beside the result
            for warning in unknown_setting_names(reader, given):
                echo(f"Warning: {warning}", err=True)
            if isinstance(outcome, DiscoveryDisabled) and view is not None:
                raise click.ClickException(f"{outcome} {_why_off(session_id, view.settings)}") from outcome
            if isinstance(outcome, ToolCallError):
                raise outcome
            if not flag_weak or view is None or outcome.query is None:
                return outcome.details, set()
            names = [match["name"] for match in outcome.details["tools"]]
            weak = weak_matches_in(reader, index.ranker, outcome.query, names, mode=view.mode)
            return outcome.details, weak


def _why_off(session_id: str, settings: SessionSettings) -> str:
    """What turned discovery off in this session and what to do instead (contract §5's mode rule)."""
    from discovery._rules import AUTO_THRESHOLD

    mode = settings.discovery_mode
    reason = f"with at most {AUTO_THRESHOLD} registered tools" if mode == "auto" else "as its settings say"
    return (
        f"(session {one_line(session_id)!r} has discovery_mode {mode}, which is off {reason}; "
        "start a new session with --mode all or --mode mcp-only)"
    )


@click.command(
    epilog=example(
        "tool-index explain 'create a pull request' mcp__github__create_pull_request",
        "tool-index explain 'send a message' mcp__slack__post_message --session my-project "
        "--identity alice@team --config mcp.json",
    )
)
@click.argument("query")
@click.argument("name")
@click.option(
    "--mode",
    type=click.Choice(["all", "mcp-only"]),
    default=None,
    help="The read-only corpus the score is computed in, as for search [default: all].",
)
@click.option(
    "--session",
    "session_id",
    metavar="ID",
    help="Explain the score in this session's corpus now: its settings and active tools.",
)
@session_identity_option
@click.option(
    "--config",
    "config_path",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="With --session: the scope of the gateway serving it, from its MCP config (its servers "
    "and their filters), which the session does not store.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the breakdown as JSON.")
@pass_app
def explain(
    app: App,
    query: str,
    name: str,
    mode: str | None,
    session_id: str | None,
    identity: str,
    config_path: str | None,
    as_json: bool,
) -> None:
    """Break down NAME's score for QUERY by term, field and fused part.

    NAME is a tool's name or a label that names one tool (as search shows it). The score is
    the one a read-only search in MODE gives NAME, with the corpus statistics behind it; with
    learning on, the learned field's terms follow the tool text's; with vectors, the last line
    shows how the lexical and semantic parts were fused. With --session, the score a search in
    that session would give NAME now (its mode, its active tools; a gateway's session also
    ranks what it has active), in the scope of the gateway --config names, if any.
    """
    if session_id is None and config_path is not None:
        raise click.UsageError("--config names the scope of a --session")
    if session_id is not None and mode is not None:
        raise click.UsageError("--mode is for a read-only explain: a session has its own mode")
    trimmed = checked_query(query)
    scope = None if config_path is None else _gateway_scope(config_path)
    with app.index() as index:
        from discovery._diagnostics.explain import explain_query, session_corpus_of
        from discovery._sessions.session import Session

        name = resolved_name(index, name)
        corpus, where = None, f"mode {mode or 'all'}"
        if session_id is None and identity != LOCAL_IDENTITY:
            corpus = read_only_corpus(mode or "all", checked_identity(identity))
            where = f"mode {mode or 'all'}, as {identity}"
        if session_id is not None:
            index.session_record(session_id, identity=identity)  # an unknown id is an error, not a new one
            session = Session(index.store, index.ranker, session_id, scope, identity=identity)
            corpus, where = session_corpus_of(session)
        label = where if corpus is not None else mode or "all"
        explanation = explain_query(index, searched_query(trimmed), name, mode=label, corpus=corpus)
    if as_json:
        echo_json(explanation.as_dict())
        return
    echo(f"{one_line(name)}  score {round6(explanation.score)}  ({one_line(where)})")
    echo(
        f"corpus: {explanation.n_docs} tools, avgdl {explanation.avgdl:.3f}; "
        f"tool length {explanation.doc_len}, norm {explanation.norm:.6f}"
    )
    rows: list[tuple[str, ...]] = [("term / field", "qtf", "df", "idf", "tf", "score")]
    for term in explanation.terms:
        idf = f"{term.idf:.6f}"
        rows.append((term.term, str(term.qtf), str(term.df), idf, str(term.tf), _six(term.contribution)))
        for part in term.fields:
            rows.append((f"  {part.field} ×{part.weight}", "", "", "", str(part.tf), _six(part.contribution)))
    print_table(rows)
    if explanation.learning:
        echo("learned field: not length-normalised (its norm is k1 for every tool)")
        if explanation.learned:
            learned: list[tuple[str, ...]] = [("learned term", "qtf", "df", "weight", "tf", "score")]
            for taught in explanation.learned:
                weight = f"{taught.weight:.6f}"
                learned.append(
                    (
                        taught.term,
                        str(taught.qtf),
                        str(taught.df),
                        weight,
                        str(taught.tf),
                        _six(taught.contribution),
                    )
                )
            print_table(learned)
    semantic = explanation.semantic
    if semantic is not None:
        lexical_part, semantic_part = semantic.parts(explanation.lexical_score)
        echo(
            f"fused with the semantic signal, weight {semantic.weight:g}: "
            f"lexical {_six(explanation.lexical_score)} / best {_six(semantic.best_lexical)} "
            f"× {1 - semantic.weight:g} = {_six(lexical_part)}; "
            f"cosine {semantic.cosine:.6f} / best {semantic.best_cosine:.6f} × {semantic.weight:g} "
            f"= {_six(semantic_part)}"
        )


def _gateway_scope(config_path: str) -> Scope:
    """The scope a gateway of ``config_path`` gives its sessions: its servers, its filters."""
    from discovery._mcp.scope import GatewayScope
    from discovery.cli._mcp import _config

    config = _config(config_path)
    return GatewayScope(frozenset(config.servers), config.tool_filter)


def unknown_setting_names(reader: Reader, settings: dict[str, Any]) -> list[str]:
    """What a new session's settings name that the catalog lacks (contract §5 ignores such names)."""
    options = {"requested": "--request", "essential_override": "--essential"}
    warnings = []
    for key, option in options.items():
        names = settings.get(key) or []
        known = reader.catalog.tools_by_names(names) if names else {}
        warnings += [
            f"{option} {name!r} is not in the catalog; ignored" for name in names if name not in known
        ]
    servers = settings.get("default_servers") or []
    present = reader.catalog.servers() if servers else set()
    warnings += [
        f"--default-server {server!r} has no tools in the catalog; ignored"
        for server in servers
        if server not in present
    ]
    return warnings


def _six(score: float) -> str:
    return f"{round6(score):.6f}"
