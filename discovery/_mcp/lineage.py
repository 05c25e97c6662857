"""A gateway never fronts itself over HTTP, however its URLs are spelled. Each process has a
random id; every HTTP answer of its gateway carries, in a header, that id and the ids of the
gateways behind it (those its own HTTP upstreams answered with). An upstream whose answer carries
this process's own id is this gateway, or a gateway that leads back to it: the connection to it
is refused. Asked of the servers themselves, not guessed from URLs (a proxy, another host name,
an IPv6 spelling all reach the same gateway)."""

from __future__ import annotations

import re
import secrets
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = "tool-index-gateways"
OWN_ID = secrets.token_hex(8)
"""This process's id: random, so two gateways are never taken for one."""
MAX_IDS = 64
"""Ids kept and sent at most: a header stays small whatever the upstreams send."""
_ID = re.compile(r"[0-9a-f]{16}")
_behind: set[str] = set()
"""The ids of the gateways behind this one, as its HTTP upstreams' answers named them."""

LOOP = "it is this gateway, or a gateway that leads back to it (its answers carry this gateway's id)"


def advertised() -> str:
    """The header's value: this gateway's id first, then those of the gateways behind it."""
    return ",".join([OWN_ID, *sorted(_behind)][:MAX_IDS])


def leads_back(value: str | None) -> bool:
    """Whether an upstream's header names this gateway; the ids it names otherwise are kept as
    gateways behind this one (so a gateway in front of this one learns it leads back)."""
    if not value:
        return False
    named = {part.strip() for part in value[: MAX_IDS * 17].split(",")}
    ids = {part for part in named if _ID.fullmatch(part)}
    if OWN_ID in ids:
        return True
    if len(_behind) < MAX_IDS:
        _behind.update(sorted(ids)[: MAX_IDS - len(_behind)])
    return False


class Advertise:
    """ASGI middleware: every HTTP answer carries ``HEADER``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (HEADER.encode(), advertised().encode())]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_header)
