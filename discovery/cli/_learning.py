"""Learning commands: turn learning from use on or off, and see or forget what tools learned."""

from __future__ import annotations

import click

from discovery._ranking.sharing import DESTRUCTIVE_FACTOR
from discovery.cli._app import App, echo, echo_json, example, pass_app
from discovery.cli._names import resolved_names
from discovery.cli._output import print_fields, print_table
from discovery.cli._render import one_line
from discovery.errors import ToolNotFound


@click.command(
    epilog=example(
        "tool-index learning on",
        "tool-index learning on --min-identities 3",
        "tool-index learning status",
    )
)
@click.argument("action", type=click.Choice(["on", "off", "status"]))
@click.option(
    "--min-identities",
    "min_identities",
    type=int,
    metavar="K",
    help="With on or off: how many distinct identities must teach a term to a tool before it ranks "
    "for other identities (at least 2; twice K for a destructive tool). A new index has 2.",
)
@pass_app
def learning(app: App, action: str, min_identities: int | None) -> None:
    """Turn learning from use on or off, or show its status.

    On, each tool also ranks by the requests that led sessions to call it (a learned field computed
    from the session logs and kept current by every recorded call). Off, rankings are exactly the
    unlearned ones; nothing is lost: turning it on again computes the field from the logs.

    What an identity taught ranks for its own sessions at once, and for other identities once K
    distinct identities taught the same term to the same tool (2K when the tool's annotations say
    destructiveHint): one identity, however many sessions it opens, cannot steer the others.
    """
    if action == "status" and min_identities is not None:
        raise click.UsageError("--min-identities goes with on or off")
    with app.index() as index:
        if action != "status":
            changed = index.set_learning(action == "on", min_identities=min_identities)
            if not changed:
                echo(f"learning was already {action}")
        summary = index.stats()["learning"]
    k = summary["min_identities"]
    print_fields(
        [
            ("learning", "on" if summary["enabled"] else "off"),
            ("min identities", f"{k} ({k * DESTRUCTIVE_FACTOR} for a destructive tool)"),
            ("tools", str(summary["tools"])),
            ("terms", str(summary["terms"])),
            ("sessions", str(summary["sessions"])),
            ("identities", str(summary["identities"])),
        ],
        key_width=16,
    )


@click.command(
    epilog=example(
        "tool-index learned mcp__slack__post_message",
        "tool-index learned mcp__slack__post_message --identity alice@team --json",
        "tool-index learned --forget mcp__slack__post_message",
        "tool-index learned --forget-identity mallory@team",
        "tool-index learned --forget-all",
    )
)
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print what NAME learned as JSON.")
@click.option(
    "--identity", metavar="NAME", help="Also say, per term, whether this identity taught it to NAME."
)
@click.option("--forget", "forget", is_flag=True, help="Forget what NAME learned, for good.")
@click.option(
    "--forget-identity",
    "forget_identity",
    metavar="IDENTITY",
    help="Forget everything IDENTITY taught, for good (e.g. after its token leaked).",
)
@click.option("--forget-all", "forget_all", is_flag=True, help="Forget what every tool learned, for good.")
@pass_app
def learned(
    app: App,
    name: str | None,
    as_json: bool,
    identity: str | None,
    forget: bool,
    forget_identity: str | None,
    forget_all: bool,
) -> None:
    """Show the terms tool NAME learned from use, or forget them.

    Each term is a word of a request that a session searched before calling NAME, with how many
    identities and sessions taught it, and whether it is shared: taught by enough identities (K,
    or 2K for a tool marked destructive) to rank for identities that did not teach it. Forgetting
    removes them and marks the logged calls so that they never teach again (the session logs
    themselves, queries included, stay until the sessions are deleted).
    """
    if forget_all and (name is not None or forget or forget_identity is not None):
        raise click.UsageError("--forget-all takes no NAME, no --forget and no --forget-identity")
    if forget_identity is not None:
        if name is not None or forget:
            raise click.UsageError("--forget-identity takes no NAME and no --forget")
        with app.index() as index:
            removed = index.forget_learning(identity=forget_identity)
        echo(f"forgot {removed} learned credits taught by {one_line(forget_identity)}")
        return
    if not forget_all and name is None:
        raise click.UsageError("name a tool, or give --forget-all or --forget-identity")
    with app.index() as index:
        if forget_all:
            removed = index.forget_learning()
            echo(f"forgot {removed} learned credits of every tool")
            return
        assert name is not None
        (resolved,) = resolved_names(index, [name])
        summary = index.learned(resolved, identity=identity)
        if not summary.terms and not index.tools_by_names([resolved]):
            raise ToolNotFound(f"no tool named {name!r} in the catalog, and nothing learned under that name")
        if forget:
            removed = index.forget_learning([resolved])
            echo(f"forgot {removed} learned credits of {one_line(resolved)}")
            return
    if as_json:
        echo_json(summary.as_dict())
        return
    marked = (
        f"; destructive (its MCP annotations say destructiveHint): shared at {summary.threshold} identities"
        if summary.destructive
        else f"; shared at {summary.threshold} identities"
    )
    echo(
        f"{one_line(resolved)}: {len(summary.terms)} learned terms from {summary.sessions} sessions of "
        f"{summary.identities} identities (learning {'on' if summary.enabled else 'off'}{marked})"
    )
    if summary.terms:
        header = ("term", "identities", "sessions", "shared")
        yours = () if identity is None else (f"taught by {one_line(identity)}",)
        rows = [
            (
                taught.term,
                str(taught.identities),
                str(taught.sessions),
                "yes" if taught.shared else "no",
                *(() if taught.yours is None else ("yes" if taught.yours else "no",)),
            )
            for taught in summary.terms
        ]
        print_table([(*header, *yours), *rows])
