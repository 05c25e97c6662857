"""Learning commands: turn learning from use on or off, and see or forget what tools learned."""

from __future__ import annotations

import click

from discovery.cli._app import App, echo, echo_json, example, pass_app
from discovery.cli._names import resolved_names
from discovery.cli._output import print_fields, print_table
from discovery.cli._render import one_line
from discovery.errors import ToolNotFound


@click.command(epilog=example("tool-index learning on", "tool-index learning status"))
@click.argument("action", type=click.Choice(["on", "off", "status"]))
@pass_app
def learning(app: App, action: str) -> None:
    """Turn learning from use on or off, or show its status.

    On, each tool also ranks by the requests that led sessions to call it (a learned field computed
    from the session logs and kept current by every recorded call). Off, rankings are exactly the
    unlearned ones; nothing is lost: turning it on again computes the field from the logs.
    """
    with app.index() as index:
        if action != "status":
            changed = index.set_learning(action == "on")
            if not changed:
                echo(f"learning was already {action}")
        summary = index.stats()["learning"]
    print_fields(
        [
            ("learning", "on" if summary["enabled"] else "off"),
            ("tools", str(summary["tools"])),
            ("terms", str(summary["terms"])),
            ("sessions", str(summary["sessions"])),
        ],
        key_width=10,
    )


@click.command(
    epilog=example(
        "tool-index learned mcp__slack__post_message",
        "tool-index learned --forget mcp__slack__post_message",
        "tool-index learned --forget-all",
    )
)
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print what NAME learned as JSON.")
@click.option("--forget", "forget", is_flag=True, help="Forget what NAME learned, for good.")
@click.option("--forget-all", "forget_all", is_flag=True, help="Forget what every tool learned, for good.")
@pass_app
def learned(app: App, name: str | None, as_json: bool, forget: bool, forget_all: bool) -> None:
    """Show the terms tool NAME learned from use, or forget them.

    Each term is a word of a request that a session searched before calling NAME, with how many
    sessions taught it. Forgetting removes them and marks the logged calls so that they never
    teach again (the session logs themselves, queries included, stay until the sessions are
    deleted).
    """
    if forget_all and (name is not None or forget):
        raise click.UsageError("--forget-all takes no NAME and no --forget")
    if not forget_all and name is None:
        raise click.UsageError("name a tool, or give --forget-all")
    with app.index() as index:
        if forget_all:
            removed = index.forget_learning()
            echo(f"forgot {removed} learned credits of every tool")
            return
        assert name is not None
        (resolved,) = resolved_names(index, [name])
        summary = index.learned(resolved)
        if not summary.terms and not index.tools_by_names([resolved]):
            raise ToolNotFound(f"no tool named {name!r} in the catalog, and nothing learned under that name")
        if forget:
            removed = index.forget_learning([resolved])
            echo(f"forgot {removed} learned credits of {one_line(resolved)}")
            return
    if as_json:
        echo_json(summary.as_dict())
        return
    marked = ", destructive: its MCP annotations say destructiveHint" if summary.destructive else ""
    echo(
        f"{one_line(resolved)}: {len(summary.terms)} learned terms from {summary.sessions} sessions "
        f"(learning {'on' if summary.enabled else 'off'}{marked})"
    )
    if summary.terms:
        print_table([("term", "sessions"), *((term, str(count)) for term, count in summary.terms)])
