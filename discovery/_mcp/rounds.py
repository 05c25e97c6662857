"""A forwarded call of a 2026-07-28 client in rounds, and the progress of a call passed on.

That protocol has no requests from a server, so what an upstream asks during a call (sampling,
elicitation, roots) goes to the client as input-required results and comes back in its retries,
while the upstream call waits for the answers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp import MCPError, types
from mcp.shared.dispatcher import ProgressFnT

from discovery._mcp.pool import Context

Question = types.CreateMessageRequest | types.ElicitRequest | types.ListRootsRequest
"""What an upstream server asks of the gateway's client during a call."""


def text_result(text: str, *, is_error: bool) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=is_error)


def progress_relay(ctx: Context) -> ProgressFnT | None:
    """When the client gave its call a progress token: what passes the upstream's progress on to
    it (the upstream gets a token of its own from the gateway's client, which routes it back)."""
    if not (ctx.meta or {}).get("progress_token"):
        return None

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        await ctx.session.report_progress(progress, total, message)

    return relay


@dataclass(eq=False)
class _Ask:
    """A question of an upstream server to a 2026-07-28 client, and its answer once it came."""

    request: Question
    sent: bool = False
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: Any = None


class Rounds:
    """One call in rounds: its questions, its result once it has one."""

    def __init__(self, owner: tuple[str | None, str], ctx: Context) -> None:
        self.owner = owner
        """Who may continue the call: the identity and session that started it."""
        self.ctx = ctx
        """The client's request of the latest round (its log messages and progress go there)."""
        self.asks: dict[str, _Ask] = {}
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.result: types.CallToolResult | None = None
        self.failure: Exception | None = None
        """What the call raised (the database failed): the SDK answers it as an error."""
        self._count = 0
        self._wake = anyio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def ask(self, request: Question) -> Any:
        """Put a question to the client in the next round; its answer when it comes."""
        self._count += 1
        key = f"q{self._count}"
        ask = self.asks[key] = _Ask(request)
        self.wake()
        try:
            await ask.answered.wait()
        finally:
            del self.asks[key]
        return ask.answer

    def answer(self, responses: Mapping[str, Any]) -> None:
        for key, response in responses.items():
            ask = self.asks.get(key)
            if ask is not None and ask.sent and not ask.answered.is_set():
                ask.answer = response
                ask.answered.set()

    async def next_round(self, token: str) -> types.CallToolResult | types.InputRequiredResult:
        """The call's result once it has one, or the questions asked since the last round."""
        while True:
            self._wake = anyio.Event()
            if self.done.is_set():
                if self.failure is not None:
                    raise self.failure
                return self.result or text_result("The call was cancelled.", is_error=True)
            unsent = {key: ask for key, ask in self.asks.items() if not ask.sent}
            if unsent:
                for ask in unsent.values():
                    ask.sent = True
                requests = {key: ask.request for key, ask in unsent.items()}
                return types.InputRequiredResult(input_requests=requests, request_state=token)
            await self._wake.wait()

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        relay = progress_relay(self.ctx)
        # Between two rounds no request of the client waits for it: dropped.
        if relay is not None:
            with contextlib.suppress(
                MCPError, RuntimeError, anyio.ClosedResourceError, anyio.BrokenResourceError
            ):
                await relay(progress, total, message)
