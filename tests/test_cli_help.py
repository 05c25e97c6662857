"""Every command and subcommand of ``tool-index`` has help: a one-line summary and an example."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from discovery.cli._main import main


def command_paths(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    if isinstance(command, click.Group):
        context = click.Context(command)
        for name in command.list_commands(context):
            subcommand = command.get_command(context, name)
            assert subcommand is not None, name
            yield from command_paths(subcommand, (*path, name))


def resolve(path: tuple[str, ...]) -> click.Command:
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None, name
        command = found
    return command


PATHS = list(command_paths(main))


def test_the_walk_finds_the_commands() -> None:
    names = {" ".join(path) for path in PATHS}
    expected = {"", "import", "search", "tools", "show", "remove", "stats", "explain", "verify", "db"}
    assert expected | {"db upgrade", "db current", "db check"} <= names


@pytest.mark.parametrize("path", PATHS, ids=lambda path: " ".join(path) or "tool-index")
@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help(path: tuple[str, ...], flag: str) -> None:
    result = CliRunner().invoke(main, [*path, flag], prog_name="tool-index")
    assert (result.exit_code, result.stderr) == (0, "")
    usage = " ".join(["Usage: tool-index", *path])
    assert result.stdout.startswith(usage + " ")
    command = resolve(path)
    summary = (command.help or "").strip().splitlines()[0] if command.help else ""
    assert summary.endswith("."), f"{usage}: the docstring needs a one-line summary"
    assert f"\n  {summary}\n" in result.stdout
    assert "\n  Example:\n" in result.stdout or "\n  Examples:\n" in result.stdout
    assert "\n    tool-index " in result.stdout.split("Example")[-1], "examples are command lines"


@pytest.mark.parametrize("path", PATHS, ids=lambda path: " ".join(path) or "tool-index")
def test_options_are_documented(path: tuple[str, ...]) -> None:
    command = resolve(path)
    for parameter in command.params:
        if isinstance(parameter, click.Option):
            assert parameter.help, f"{' '.join(path)} {parameter.opts}: option without help"


@pytest.mark.parametrize("group", [path for path in PATHS if isinstance(resolve(path), click.Group)])
def test_command_lists_are_not_cut(group: tuple[str, ...]) -> None:
    """The one-line summaries fit an 80-column listing (click cuts longer ones with '...')."""
    result = CliRunner().invoke(main, [*group, "-h"], prog_name="tool-index", terminal_width=80)
    listing = result.stdout.split("Commands:\n")[1].split("\n\n")[0]
    assert "..." not in listing, listing
