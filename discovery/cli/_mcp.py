"""The gateway's commands, ``tool-index sync`` and ``tool-index serve``.

The MCP SDK is imported when one of them runs, never when the command line starts.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

import click

from discovery.cli._sanitize import escaped

if TYPE_CHECKING:
    from discovery._index import ToolIndex
    from discovery._mcp.config import McpConfig
    from discovery._mcp.options import ServeOptions
    from discovery.cli._app import App

NEW_ANALYZER = "enhanced"
"""The analyzer of a database that ``sync`` or ``serve`` makes: it finds more tools for the
sentences models write (docs/quality.md)."""


def _example(*lines: str) -> str:
    title = "Examples:" if len(lines) > 1 else "Example:"
    return "\b\n" + title + "\n" + "\n".join(f"  {line}" for line in lines)


def _config(path: str, allow: tuple[str, ...] = (), deny: tuple[str, ...] = ()) -> McpConfig:
    # The SDK logs what upstream servers send that it cannot parse, tracebacks included: third-party
    # text that must not reach a terminal raw. A server's failure is reported in our own words.
    for name in ("mcp", "mcp_types", "httpx2", "uvicorn"):
        logging.getLogger(name).addHandler(logging.NullHandler())
        logging.getLogger(name).propagate = False
    config = _read_config(path, allow, deny)
    for warning in config.warnings():
        click.echo(f"Warning: {escaped(warning)}", err=True)
    return config


def _read_config(path: str, allow: tuple[str, ...], deny: tuple[str, ...]) -> McpConfig:
    """The config file with the command line's filters beside its own, less the entries that are
    gateways leading back to it (``serve`` reads it again whenever the file changes)."""
    import dataclasses

    from discovery._mcp.config import load_config
    from discovery._mcp.loops import without_loops

    config = without_loops(load_config(path))
    return dataclasses.replace(config, tool_filter=config.tool_filter.joined(allow, deny))


def _anyio_run(work: Any, *args: Any) -> Any:
    import anyio  # here, not at the top: the other commands start without loading it

    return anyio.run(work, *args)


config_option = click.option(
    "--config",
    "config_path",
    required=True,
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help='An MCP config: "mcpServers" (Claude Desktop, Claude Code, Cursor) or VS Code\'s "servers".',
)
timeout_option = click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="Longest wait for a server to start (from its own start) or list its tools (every page).",
)
call_timeout_option = click.option(
    "--call-timeout",
    type=click.FloatRange(min=0.1),
    default=300.0,
    show_default=True,
    metavar="SECONDS",
    help="Longest wait for one tool call's answer; then the call is cancelled on its server (restarted "
    "on the next call if it no longer answers).",
)
max_starting_option = click.option(
    "--max-starting",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    metavar="N",
    help="Start at most N stdio servers at once (sync: run at most N at once).",
)


def filter_options(command: Any) -> Any:
    deny = click.option(
        "--deny",
        multiple=True,
        metavar="PATTERN",
        help="Leave out the tools whose server/tool matches (a glob: 'github/delete_*'; repeatable). "
        "Deny wins over allow.",
    )
    allow = click.option(
        "--allow",
        multiple=True,
        metavar="PATTERN",
        help="Only the tools whose server/tool matches one such glob (repeatable).",
    )
    return allow(deny(command))


analyzer_option = click.option(
    "--analyzer",
    metavar="NAME",
    help=f"The analyzer of a new database (one without tools): reference or enhanced [default: "
    f"{NEW_ANALYZER}]. A database that holds tools keeps its own.",
)


def _index(app: App, analyzer: str | None) -> ToolIndex:
    """The index, created when new: with ``analyzer``, or else ``NEW_ANALYZER`` when it holds no
    tools yet; a catalog indexed with another analyzer keeps its own. A SQLite catalog made by
    an older version of its analyzer is rebuilt with this release's, said on stderr: the
    gateway's own file would otherwise be refused until ``tool-index reindex``. A PostgreSQL
    catalog is left to ``reindex``: other hosts, on older releases, may share it."""
    from discovery._index import reindexed
    from discovery.errors import AnalyzerOutdated

    try:
        return _opened(app, analyzer)
    except AnalyzerOutdated as exc:
        if exc.version is None or exc.version > exc.current:
            raise  # a newer release's terms, or unknown ones: not this release's to rewrite
        outdated = exc
    index = app.index(create=True)
    try:
        if index.store.engine.dialect.name != "sqlite":
            raise outdated  # a catalog other hosts may share
        count = reindexed(index.store, outdated.name, if_outdated=True)
    except BaseException:
        index.close()
        raise
    if count is not None:  # else another process rebuilt it meanwhile
        click.echo(
            f"Reindexed {count} tools with version {outdated.current} of the {outdated.name} analyzer "
            f"(the catalog was made with version {outdated.version})",
            err=True,
        )
    return index


def _opened(app: App, analyzer: str | None) -> ToolIndex:
    from discovery._params import analyzer_named

    if analyzer is not None:
        analyzer_named(analyzer)
        return app.index(create=True, analyzer=analyzer)
    index = app.index(create=True)
    try:
        keep = index.analyzer == NEW_ANALYZER or index.stats()["tools"]
    except BaseException:
        index.close()
        raise
    if keep:
        return index
    index.close()
    # Giving a catalog without tools an analyzer is what opening with one does.
    return app.index(create=True, analyzer=NEW_ANALYZER)


upstream_log_option = click.option(
    "--upstream-log",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="Append what stdio servers write on stderr to FILE [default: discarded].",
)


@contextmanager
def _upstream_log(path: str | None) -> Iterator[TextIO]:
    """The upstream log, opened without waiting: a FIFO nobody reads is refused at once (ENXIO)
    instead of hanging the command before it starts. Writes then block as a file's do, in the
    thread that copies a server's stderr, never on the event loop."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK
    try:
        descriptor = os.open(path or os.devnull, flags, 0o644)
    except OSError as exc:
        why = "a FIFO that nothing reads" if exc.errno == errno.ENXIO else exc.strerror
        raise click.BadParameter(f"cannot write {path}: {why}", param_hint="--upstream-log") from exc
    os.set_blocking(descriptor, True)
    with open(descriptor, "a", encoding="utf-8") as stream:
        yield stream


@click.command(
    epilog=_example(
        "tool-index sync --config ~/.cursor/mcp.json",
        "tool-index sync --config .mcp.json --server github --server slack",
    )
)
@config_option
@click.option("--server", "servers", multiple=True, metavar="NAME", help="Only this server (repeatable).")
@click.option(
    "--take-over",
    "take_over",
    multiple=True,
    metavar="NAME",
    help="Replace the catalog's server NAME even when another config synced a different server under "
    "that name (repeatable); without it such a server is refused.",
)
@filter_options
@analyzer_option
@timeout_option
@max_starting_option
@upstream_log_option
@click.pass_obj
def sync(
    app: App,
    config_path: str,
    servers: tuple[str, ...],
    take_over: tuple[str, ...],
    allow: tuple[str, ...],
    deny: tuple[str, ...],
    analyzer: str | None,
    timeout: float,
    max_starting: int,
    upstream_log: str | None,
) -> None:
    """Index the tools of live MCP servers, as import --replace would.

    Connects to every server of the config (or each --server), at most --max-starting stdio
    servers at once, reads its whole tools/list and writes it as mcp__<server>__<tool>, one
    transaction per server. A server that fails keeps
    the tools it had; the others are synced all the same, and the exit status is 1. Every tool a
    server lists is stored: --allow, --deny and the config's "toolIndex" filters shape what a
    gateway of this config offers (its count is shown), never the catalog other hosts share.

    The catalog records what each server is (its command and arguments, or URL) and which host's
    config synced it. A server whose name the catalog holds for another config's different server
    is refused when it would change that name's tools (they are left as they are), unless
    --take-over NAME; the config that synced a server may change it (a new version).
    """
    from discovery.cli._render import one_line

    config = _config(config_path, allow, deny)
    selected = [server.name for server in config.select(list(servers))]
    not_synced = [name for name in take_over if name not in selected]
    if not_synced:
        raise click.UsageError(f"--take-over {not_synced[0]}: not a server this sync syncs")
    with _index(app, analyzer) as index, _upstream_log(upstream_log) as errlog:
        results = _anyio_run(_sync, index, config, selected, timeout, max_starting, errlog, take_over)
    failed = []
    for result in results:
        if result.report is None:
            failed.append(result.server)
            what = "refused" if result.refused else "failed"
            click.echo(f"{result.server}: {what}: {one_line(result.error or '')}")
        else:
            counts = ", ".join(f"{key} {value}" for key, value in result.report.counts().items())
            if result.not_offered:
                counts += f"; {result.not_offered} not offered by this config's filters"
            click.echo(f"{result.server}: {counts}")
    if failed:
        raise click.ClickException(f"{len(failed)} of {len(results)} servers failed: {', '.join(failed)}")


async def _sync(
    index: Any,
    config: Any,
    servers: list[str],
    timeout: float,
    max_starting: int,
    errlog: TextIO,
    take_over: tuple[str, ...],
) -> Any:
    from discovery._mcp.sync import Library, sync_servers
    from discovery._mcp.upstreams import Upstreams

    async with Upstreams(config, timeout=timeout, errlog=errlog, max_starting=max_starting) as upstreams:
        return await sync_servers(Library(index), upstreams, servers, close=True, take_over=take_over)


@click.command(
    epilog=_example(
        "tool-index serve --config .mcp.json --session my-project",
        "tool-index serve --config mcp.json --transport http --port 8765",
        'tool-index serve --config mcp.json --transport http --host 0.0.0.0 --token "$TOKEN"',
    )
)
@config_option
@click.option(
    "--session",
    "session_id",
    metavar="ID",
    help="stdio: the persisted session to serve (created when new) [default: a new one, printed on stderr].",
)
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for one client that starts the gateway; http for any number of clients.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: the address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="HTTP: the port (0: any free one).",
)
@click.option(
    "--token",
    envvar="TOOL_INDEX_TOKEN",
    show_envvar=True,
    metavar="SECRET",
    help="HTTP: require 'Authorization: Bearer SECRET' (required for a --host other than loopback).",
)
@click.option(
    "--tokens",
    "tokens_path",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help='HTTP: a JSON file {"alice": "SECRET", ...}: each token is an identity, alice@REALM, whose '
    "sessions no other identity reaches (session ids are per identity).",
)
@click.option(
    "--realm",
    metavar="NAME",
    help="With --tokens: the realm qualifying its identities; gateways given one realm share their "
    "identities [default: this host's name and the tokens file's path].",
)
@click.option(
    "--identity",
    metavar="NAME",
    default="local",
    show_default=True,
    help="Without --tokens: the identity whose sessions this gateway serves (a host naming its user).",
)
@click.option(
    "--mode",
    type=click.Choice(["mcp-only", "all", "auto"]),
    default="mcp-only",
    show_default=True,
    help="Discovery mode of a new session; auto: at most 40 tools in scope are all listed, with no search.",
)
@click.option(
    "--expose-active",
    is_flag=True,
    help="Also list the activated tools themselves, with tools/list_changed after each activation.",
)
@click.option(
    "--refresh",
    type=click.FloatRange(min=1),
    metavar="SECONDS",
    help="Sync every server now and then every SECONDS, in the background.",
)
@filter_options
@analyzer_option
@timeout_option
@call_timeout_option
@max_starting_option
@click.option(
    "--max-result-bytes",
    type=click.IntRange(min=1),
    default=10 * 1024 * 1024,
    show_default=True,
    envvar="TOOL_INDEX_MAX_RESULT_BYTES",
    show_envvar=True,
    metavar="BYTES",
    help="A tool result larger than this (its JSON) is an error result, not forwarded, and its "
    "server is restarted on the next call.",
)
@upstream_log_option
@click.pass_obj
def serve(app: App, /, **params: Any) -> None:
    """Serve the index as one MCP server in front of a config's servers.

    The model gets search_tool_bm25, which activates tools in the persisted session, and
    call_tool, which calls an activated tool on its server. Over HTTP, a client picks its
    session with the endpoint's query: http://127.0.0.1:8765/mcp?session=ID; one that names
    none gets a new session of its own for its connection (its Mcp-Session-Id).
    Searches find only tools of the config's servers that --allow, --deny and the config's
    "toolIndex" filters allow, whatever else the database holds. Servers with no tools in the
    database yet are synced in the background, and a changed config file is applied without a
    restart. Every session belongs to one identity and ids are per identity: with --tokens,
    the token's (alice@REALM), else --identity's.
    """
    import functools

    from discovery.cli._collector import collector_paused

    # pydantic and the SDK build hundreds of models as they are imported: the same pause as the
    # program's own imports (``discovery.cli.__main__``), for the same reason.
    with collector_paused():
        config = _config(params["config_path"], params["allow"], params["deny"])
        from discovery._mcp.options import ServeOptions
        from discovery._mcp.serve import serve_gateway

    options = ServeOptions(**params)
    tokens = _tokens(options)
    reload_config = functools.partial(_read_config, options.config_path, options.allow, options.deny)
    with _index(app, options.analyzer) as index, _upstream_log(options.upstream_log) as errlog:
        _anyio_run(serve_gateway, options, index, config, tokens, errlog, reload_config)


def _tokens(options: ServeOptions) -> dict[str, str] | None:
    """The identities and their secrets ``--token`` or ``--tokens`` give, checked against the
    transport and host they are for."""
    from discovery._mcp.options import qualified
    from discovery._mcp.serve import SINGLE_IDENTITY, check_bind, load_tokens
    from discovery._params import checked_identity
    from discovery._rules import LOCAL_IDENTITY

    tokens = None
    if options.tokens_path is not None:
        if options.transport != "http":
            raise click.UsageError("--tokens is for --transport http")
        if options.token is not None and click.get_current_context().get_parameter_source("token") == (
            click.core.ParameterSource.COMMANDLINE
        ):
            raise click.UsageError("give --token or --tokens, not both")
        tokens = load_tokens(options.tokens_path)
        if options.identity != LOCAL_IDENTITY:
            raise click.UsageError("--identity is for a gateway without --tokens: each token is an identity")
        realm = options.realm_name()
        assert realm is not None
        for name in tokens:
            checked_identity(qualified(name, realm))
    elif options.realm is not None:
        raise click.UsageError("--realm qualifies the identities of --tokens")
    else:
        checked_identity(options.identity)
    if options.token and options.tokens_path is None:
        tokens = {SINGLE_IDENTITY: options.token}
    if options.transport == "http":
        check_bind(options.host, "yes" if tokens else None)
        if options.session_id is not None:
            # A session of the process would be shared by every client that names none.
            raise click.UsageError(
                "--session is for stdio; over HTTP each client names its own: /mcp?session=ID"
            )
    return tokens
