"""The request body's bounds, enforced before anything decodes it: time, size and JSON nesting.

`BodyLimits` reads the whole body of every routed request first, then hands it to the app as if
it came from the client:

- a client that has not sent its whole body within `body_timeout_s` seconds is answered 408 (and
  the connection closed);
- one that closes its connection before its body is complete is answered nothing (no one is left
  to read it) and the request ends there: the HTTP metrics count it as 499 (metrics.py);
- a body over `max_body_bytes`, announced by Content-Length or as it arrives, is answered 413
  without reading the rest (and the connection closed);
- arrays and objects nested deeper than `MAX_JSON_DEPTH` levels answer 400: JSON decoders descend
  one level of the stack per level of nesting, so a few hundred kilobytes of `[[[[...` would
  exhaust it. No request of this API nests more than a handful of levels.

Reading the body here, before the /v1 routes' in-flight bound, keeps a slow sender from holding a
place in the queue.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import numpy as np
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException, ValidationException
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)
MAX_JSON_DEPTH = 64
CLOSE = {"Connection": "close"}  # an answer sent before the whole body was read ends the connection

class BodyTimeout(HTTPException):
    """The client did not send its whole body in time."""

    status_code = 408


def nesting_depth(body: bytes) -> int:
    """How deep arrays and objects nest in the JSON `body`: the most brackets open at once, outside strings.

    Openers count whether or not they are closed later (a decoder descends all the same); vector
    operations only, so the cost is a few milliseconds a megabyte whatever the body holds."""
    text = np.frombuffer(body.replace(b"\\\\", b"").replace(b'\\"', b""), np.uint8)  # escapes cannot end a string
    outside = np.cumsum(text == ord('"'), dtype=np.int32) % 2 == 0
    opens = ((text == ord("[")) | (text == ord("{"))) & outside
    closes = ((text == ord("]")) | (text == ord("}"))) & outside
    return int(np.cumsum(opens.view(np.int8) - closes.view(np.int8), dtype=np.int32).max(initial=0))


def check_nesting(body: bytes, limit: int = MAX_JSON_DEPTH) -> None:
    """A 400 when `body` nests arrays or objects more than `limit` levels deep."""
    if body.count(b"[") + body.count(b"{") <= limit:  # too few brackets to nest that deep
        return
    if (depth := nesting_depth(body)) > limit:
        message = f"arrays and objects nested {depth} levels deep; at most {limit} are accepted"
        raise ValidationException(f"body: {message}", extra=[{"key": "body", "message": message, "source": "body"}])


def _announced(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


async def read_body(receive: Receive, limit_bytes: int, timeout_s: float) -> bytes | None:
    """The whole body, or None when the client went away first; 408 after `timeout_s` (0: no limit), 413 over
    `limit_bytes`."""
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s or None):
            while True:
                message: Any = await receive()
                if message["type"] == "http.disconnect":
                    return None
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit_bytes:
                    raise RequestEntityTooLarge(f"the request body is over the limit of {limit_bytes} bytes",
                                                headers=CLOSE)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
    except TimeoutError:
        raise BodyTimeout(f"the request body did not arrive within {timeout_s:g} s", headers=CLOSE) from None


def replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the app `body` in one message, then whatever the client sends next (a disconnect)."""
    given = False

    async def app_receive() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return app_receive


class BodyLimits(ASGIMiddleware):
    """Reads the body within `body_timeout_s` and `max_body_bytes`, checks its nesting, then calls the app."""

    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        cfg = scope["app"].state.cfg
        announced = _announced(scope)
        if announced is not None and announced > cfg.max_body_bytes:
            raise RequestEntityTooLarge(f"the request body is over the limit of {cfg.max_body_bytes} bytes",
                                        headers=CLOSE)
        body = await read_body(receive, cfg.max_body_bytes, cfg.body_timeout_s)
        if body is None:
            log.info("%s %s: the client went away before its body was complete", scope.get("method"),
                     scope.get("path"))
            return
        check_nesting(body)
        await next_app(scope, replay(body, receive), send)
