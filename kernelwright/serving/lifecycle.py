"""A request's life beyond its handler: cancelled when its client goes away, drained at shutdown.

Litestar cancels a streaming response when the client disconnects, but not an ordinary handler:
`CancelOnDisconnect` listens for `http.disconnect` once the request body is read and cancels the
handler (and so the generation it awaits). At shutdown `drain` stops new /v1 requests (503) and
waits for those in flight, up to `drain_timeout_s`; the handlers still running then are cancelled
and their requests answered 503 with Retry-After (a stream already started just ends), so that no
client is left with a 500 or a dropped connection it cannot tell from a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import msgspec
from litestar.datastructures import State
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from kernelwright.serving import metrics
from kernelwright.serving.limits import error_body

log = logging.getLogger(__name__)
CUT_OFF_S = 1.0  # after the drain's deadline, how long the handlers cut off have to send their 503


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
    """Cancels the handler of a request whose client disconnected before its answer was sent.

    The handler is kept in `state.handlers` while it runs, so that `drain` can cut it off at its
    deadline: its request is then answered 503 here (when nothing was sent yet)."""

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        state = scope["app"].state
        listener = _Listener(receive)
        answered = asyncio.Event()  # the last body chunk went out: a disconnect now is the client done
        started = asyncio.Event()

        async def tracked(message: Message) -> None:
            if message["type"] == "http.response.start":
                started.set()
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered.set()

        app = asyncio.ensure_future(next_app(scope, listener.app_receive, tracked))
        listen = asyncio.ensure_future(listener.listen())
        state.handlers.add(app)
        try:
            await asyncio.wait({app, listener.gone}, return_when=asyncio.FIRST_COMPLETED)
            if app.cancelled() and not listener.gone.done():  # cut off by the drain's deadline
                return await _cut_off(state, scope, send, started.is_set())
            if app.done() or answered.is_set():
                return await app
            app.cancel()
            metrics.CANCELLED.inc()
            log.info("%s %s cancelled: the client went away", scope.get("method"), scope.get("path"))
            with contextlib.suppress(asyncio.CancelledError):
                await app
        finally:
            state.handlers.discard(app)
            listen.cancel()
            app.cancel()


async def _cut_off(state: State, scope: Scope, send: Send, started: bool) -> None:
    """A request whose handler the drain's deadline stopped: 503 with Retry-After, unless its answer had begun."""
    log.warning("%s %s cut off: the server is shutting down", scope.get("method"), scope.get("path"))
    if started:  # a stream already under way ends where it is
        return
    body = msgspec.json.encode(error_body(503, "the server shut down before this request was answered: retry"))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"retry-after", str(state.cfg.retry_after_s).encode())]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def drain(state: State, timeout_s: float) -> None:
    """Refuse new /v1 requests and wait for those in flight (at most `timeout_s` seconds); cut off those left.

    The deadline is `state.drain_deadline` (monotonic seconds), which a drain already under way
    keeps and which may be moved earlier meanwhile (a second signal)."""
    state.draining = True
    latest = time.monotonic() + timeout_s
    state.drain_deadline = latest if state.drain_deadline is None else min(state.drain_deadline, latest)
    while state.in_flight and time.monotonic() < state.drain_deadline:
        await asyncio.sleep(0.05)
    if not state.in_flight:
        return
    log.warning("%d requests still in flight after %g s: they answer 503", state.in_flight, timeout_s)
    for handler in list(state.handlers):
        handler.cancel()
    deadline = time.monotonic() + CUT_OFF_S
    while state.in_flight and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
