"""What a gateway runs beside its requests (``discovery._mcp.background``): a task that raises is
said on stderr, its traceback once, and started again after a pause; a database outage inside
it is left to the outage's own line; an error in a task group is told as the task's own."""

from __future__ import annotations

import io

import anyio
import pytest

from discovery._mcp import background
from discovery._mcp.background import supervised
from store.errors import DatabaseUnavailable


class Flaky:
    """Fails with each of ``errors`` in turn, then returns."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.runs = 0

    async def __call__(self) -> None:
        self.runs += 1
        if self.errors:
            raise self.errors.pop(0)


@pytest.fixture(autouse=True)
def short_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(background, "FIRST_PAUSE", 0.01)


def test_a_task_that_raises_is_said_traced_once_and_started_again_until_it_returns() -> None:
    said: list[str] = []
    errlog = io.StringIO()
    task = Flaky(KeyError("gone"), ValueError("bad value"))
    anyio.run(supervised, "the config watch", task, said.append, errlog)
    assert task.runs == 3
    assert said == [
        "the config watch failed (KeyError: 'gone'); starting it again in 0.01 s",
        "the config watch failed (ValueError: bad value); starting it again in 0.02 s",
    ]
    assert errlog.getvalue().count("Traceback") == 1 and "KeyError" in errlog.getvalue()


def test_an_outage_in_a_task_is_not_said_again_and_the_task_runs_again() -> None:
    said: list[str] = []
    outage = DatabaseUnavailable("cannot reach postgresql://db/tools")
    task = Flaky(ExceptionGroup("sync", [outage]))
    anyio.run(supervised, "the first sync", task, said.append, io.StringIO())
    assert (task.runs, said) == (2, [])


def test_a_task_groups_error_is_told_as_its_tasks_own() -> None:
    said: list[str] = []
    task = Flaky(ExceptionGroup("unhandled errors in a TaskGroup", [RuntimeError("upstream went away")]))
    anyio.run(supervised, "the refresh", task, said.append, io.StringIO())
    assert said == ["the refresh failed (RuntimeError: upstream went away); starting it again in 0.01 s"]
