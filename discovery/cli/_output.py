"""Tables and fields for people: rich on a terminal, sized to it; plain, stable text when piped.

Piped output is what scripts and tests read: aligned columns ``COLUMNS`` wide (120 when unset),
no styles, the same bytes on every run. On a terminal the same rows become rich tables. Every
cell is third-party text and goes through the one sanitizer first; cells are rich ``Text``, so
brackets in a tool's text are never read as rich markup.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rich import box
from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

from discovery.cli._app import echo, is_terminal, stdout_console, stdout_width
from discovery.cli._render import one_line, printable, table


def on_terminal() -> bool:
    return is_terminal(sys.stdout)


def print_table(rows: Sequence[tuple[str, ...]]) -> None:
    """``rows[0]`` is the header. Only the last column is ever cut (names are copied back)."""
    if not on_terminal():
        echo(table(list(rows), stdout_width()))
        return
    grid = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    last = len(rows[0]) - 1
    for column, head in enumerate(rows[0]):
        if column == last:
            grid.add_column(head, no_wrap=True, overflow="ellipsis", ratio=1, style="dim")
        else:
            # Never cut: names are copied back into other commands; the last column makes room.
            widest = max(cell_len(_cell(row[column])) for row in rows)
            grid.add_column(head, no_wrap=True, min_width=widest, style="cyan" if column == 0 else None)
    for row in rows[1:]:
        grid.add_row(*(Text(_cell(cell)) for cell in row))
    stdout_console().print(grid)


def print_fields(fields: Sequence[tuple[str, str]], *, key_width: int) -> None:
    """``key: value`` lines; piped, each key padded to ``key_width`` as scripts expect."""
    if not on_terminal():
        for key, value in fields:
            echo(f"{key + ':':<{key_width}}{one_line(value)}")
        return
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for key, value in fields:
        grid.add_row(Text(key), Text(one_line(value)))
    stdout_console().print(grid)


def print_block(title: str, body: str) -> None:
    """A heading and a multi-line text (a description, a schema) indented under it."""
    if not on_terminal():
        echo(f"{title}:")
        echo("\n".join(f"  {line}" for line in printable(body, keep="\n\t").splitlines()))
        return
    console = stdout_console()
    console.print(Text(title, style="bold"))
    console.print(Text(printable(body, keep="\n"), style="dim"), overflow="fold")


def _cell(cell: str) -> str:
    # Leading spaces are kept: they indent a row under the one above.
    return " " * (len(cell) - len(cell.lstrip(" "))) + one_line(cell)
