"""What a gateway runs beside its requests (the log's writer, syncs, re-syncs, the config watch)
never ends ``serve`` silently, nor at all: a task that raises is said on stderr and started again
after a pause, while the gateway goes on answering from what it has."""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable
from typing import TextIO

import anyio

from discovery._mcp.health import is_outage

FIRST_PAUSE = 1.0
"""Seconds before a failed background task starts again; each failure in a row doubles it ..."""
LONGEST_PAUSE = 60.0
"""... up to this."""


async def supervised(
    what: str, work: Callable[[], Awaitable[None]], say: Callable[[str], None], errlog: TextIO
) -> None:
    """Run ``work`` until it returns. When it raises, say so (with the traceback the first time:
    an unexpected error is a bug to report) and run it again after a pause; a database outage is
    not said again here, its one line being the database health's."""
    pause = FIRST_PAUSE
    traced = False
    while True:
        try:
            await work()
            return
        except Exception as exc:  # noqa: BLE001 - any error: the gateway serves on without the task
            error = first_error(exc)
            if not is_outage(error):
                say(f"{what} failed ({type(error).__name__}: {error}); starting it again in {pause:g} s")
                if not traced:
                    traced = True
                    traceback.print_exception(error, file=errlog)
        await anyio.sleep(pause)
        pause = min(pause * 2, LONGEST_PAUSE)


def first_error(error: BaseException) -> BaseException:
    """The error a task group raised on behalf of its first failed task, as if raised alone."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error
