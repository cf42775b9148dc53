"""A request's life beyond its handler: cancelled when its client goes away, drained at shutdown.

Litestar cancels a streaming response when the client disconnects, but not an ordinary handler:
`CancelOnDisconnect` listens for `http.disconnect` once the request body is read and cancels the
handler (and so the generation it awaits). At shutdown `drain` stops new /v1 requests (503) and
waits for those in flight, up to `drain_timeout_s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from litestar.datastructures import State
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from kernelwright.serving import metrics

log = logging.getLogger(__name__)


class _Listener:
    """Hands the request body to the app, then waits for the client to go (one reader of `receive`)."""

    def __init__(self, receive: Receive) -> None:
        self.receive = receive
        self.body_read = asyncio.Event()
        self.gone: asyncio.Future[Message] = asyncio.get_running_loop().create_future()

    async def app_receive(self) -> Message:
        if self.body_read.is_set():
            return await asyncio.shield(self.gone)
        message: Any = await self.receive()
        if message["type"] == "http.disconnect":
            self._gone(message)
        elif not message.get("more_body", False):
            self.body_read.set()
        return message  # type: ignore[no-any-return]

    def _gone(self, message: Message) -> None:
        if not self.gone.done():
            self.gone.set_result(message)

    async def listen(self) -> None:
        await self.body_read.wait()
        self._gone(await self.receive())


class CancelOnDisconnect(ASGIMiddleware):
    """Cancels the handler of a request whose client disconnected before its answer was sent."""

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        listener = _Listener(receive)
        answered = asyncio.Event()  # the last body chunk went out: a disconnect now is the client done

        async def tracked(message: Message) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered.set()

        app = asyncio.ensure_future(next_app(scope, listener.app_receive, tracked))
        listen = asyncio.ensure_future(listener.listen())
        try:
            await asyncio.wait({app, listener.gone}, return_when=asyncio.FIRST_COMPLETED)
            if app.done() or answered.is_set():
                return await app
            app.cancel()
            metrics.CANCELLED.inc()
            log.info("%s %s cancelled: the client went away", scope.get("method"), scope.get("path"))
            with contextlib.suppress(asyncio.CancelledError):
                await app
        finally:
            listen.cancel()
            app.cancel()


async def drain(state: State, timeout_s: float) -> None:
    """Refuse new /v1 requests and wait for those in flight (at most `timeout_s` seconds)."""
    state.draining = True
    deadline = time.monotonic() + timeout_s
    while state.in_flight and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    if state.in_flight:
        log.warning("shutting down with %d requests still in flight after %.0f s", state.in_flight, timeout_s)
