"""What stands in front of the handlers: API keys, readiness, the in-flight bound, request ids, errors.

Errors answer JSON with Litestar's own keys (`status_code`, `detail`, `extra`) and an OpenAI-style
`error` object; nothing a client sends yields a traceback, and keys are never logged.
"""

from __future__ import annotations

import hmac
import logging
import re
import uuid
from typing import Any

from litestar import Request, Response
from litestar.connection import ASGIConnection
from litestar.exceptions import (
    HTTPException,
    NotAuthorizedException,
    ServiceUnavailableException,
)
from litestar.handlers import BaseRouteHandler
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from kernelwright.serving import metrics
from kernelwright.serving.backend import EmptyPrompt, EngineBusy, EngineError, PromptTooLong, SamplingRefused
from kernelwright.serving.reload import version_label

log = logging.getLogger(__name__)
REQUEST_ID = "x-request-id"
MODEL_VERSION = "x-kernelwright-model-version"
_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def auth_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    keys: frozenset[str] = connection.app.state.api_keys
    if not keys:
        return
    scheme, _sep, token = connection.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not any(hmac.compare_digest(token.encode(), k.encode()) for k in keys):
        raise NotAuthorizedException("a valid API key is needed: Authorization: Bearer <key>",
                                     headers={"WWW-Authenticate": "Bearer"})


def ready_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    state = connection.app.state
    if state.draining:
        raise ServiceUnavailableException("the server is shutting down",
                                          headers={"Retry-After": str(state.cfg.retry_after_s)})
    if not state.ready:
        detail = f"the model failed to load: {state.load_error}" if state.load_error else "the model is loading"
        raise ServiceUnavailableException(detail, headers={"Retry-After": str(state.cfg.retry_after_s)})


class QueueMiddleware(ASGIMiddleware):
    """At most `max_queue` requests in flight (streams included, until their last byte); 503 beyond."""

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        state = scope["app"].state
        limit = state.cfg.max_queue
        if limit and state.in_flight >= limit:
            metrics.REJECTED.inc()
            raise ServiceUnavailableException("too many requests in flight: retry later",
                                              headers={"Retry-After": str(state.cfg.retry_after_s)})
        state.in_flight += 1
        metrics.QUEUE_DEPTH.inc()
        try:
            await next_app(scope, receive, send)
        finally:
            state.in_flight -= 1
            metrics.QUEUE_DEPTH.dec()


def request_id(scope: Scope) -> str:
    """The client's X-Request-Id when it is a sane token, else a fresh one; the same for the whole request."""
    state = scope.setdefault("state", {})  # type: ignore[typeddict-item]
    if "request_id" not in state:
        given = dict(scope.get("headers", [])).get(REQUEST_ID.encode(), b"").decode("latin-1")
        state["request_id"] = given if _SAFE_ID.match(given) else uuid.uuid4().hex
    return str(state["request_id"])


async def add_headers(message: Message, scope: Scope) -> None:
    """`before_send` hook: every response carries the request id and the served model version.

    While the server drains, each response also closes its connection, so that a client keeping it
    alive opens its next one to a server that is staying."""
    if message["type"] != "http.response.start" or scope["type"] != "http":
        return
    state = scope["app"].state
    noted = scope.get("state", {}).get("model_version")  # type: ignore[union-attr]
    version = noted or (version_label(state.served.info) if state.ready else "loading")
    headers = list(message.get("headers", []))
    headers += [(REQUEST_ID.encode(), request_id(scope).encode()), (MODEL_VERSION.encode(), str(version).encode())]
    if state.draining and all(name.lower() != b"connection" for name, _ in headers):
        headers.append((b"connection", b"close"))
    message["headers"] = headers


def _param(extra: Any) -> str | None:
    if isinstance(extra, list) and extra and isinstance(extra[0], dict):
        return str(extra[0].get("key")) if extra[0].get("key") else None
    return None


def error_body(status: int, detail: str, extra: Any = None) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    body: dict[str, Any] = {"status_code": status, "detail": detail,
                            "error": {"message": detail, "type": kind, "param": _param(extra), "code": status}}
    if extra:
        body["extra"] = extra
    return body


def http_error(_: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    detail = exc.detail
    if exc.extra and isinstance(exc.extra, list) and _param(exc.extra):
        named = [f"{e.get('key')}: {e.get('message')}" for e in exc.extra if isinstance(e, dict)]
        detail = detail if detail.startswith(named[0]) else f"{detail}: {'; '.join(named)}"
    return Response(error_body(exc.status_code, detail, exc.extra), status_code=exc.status_code,
                    headers=exc.headers)


def _refused_field(exc: PromptTooLong | SamplingRefused | EmptyPrompt) -> str:
    """The request field a backend's refusal is about."""
    if isinstance(exc, SamplingRefused):
        return exc.field
    return "prompt" if isinstance(exc, EmptyPrompt) else "max_new_tokens"


def server_error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    if isinstance(exc, PromptTooLong | SamplingRefused | EmptyPrompt):
        key = _refused_field(exc)
        extra = [{"key": key, "message": str(exc), "source": "body"}]
        return Response(error_body(400, f"{key}: {exc}", extra), status_code=400)
    if isinstance(exc, EngineBusy):
        retry = str(request.app.state.cfg.retry_after_s)
        return Response(error_body(503, str(exc)), status_code=503, headers={"Retry-After": retry})
    if isinstance(exc, EngineError):  # the engine's fault, said in one line (no traceback: nothing here to debug)
        log.warning("request %s %s: %s", request.method, request.url.path, exc)
        return Response(error_body(exc.status, str(exc)), status_code=exc.status)
    log.error("request %s %s failed: %s", request.method, request.url.path, type(exc).__name__, exc_info=exc)
    return Response(error_body(500, "internal error: see the server log"), status_code=500)
