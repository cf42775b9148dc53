"""kernelwright's Prometheus series: every HTTP answer, and what the server does for them.

`observe` counts each HTTP request once, where its answer leaves the app (after every middleware
and error handler), by method, route template and the status sent: what the client got, 503s of a
full queue and 429s of the rate limit included. A request whose client closed its connection
before any answer was sent is counted with status 499 (nginx's code for it; nothing was sent); a
request the app failed without answering is counted as the 500 the ASGI server then sends.

The collectors live in the process-wide default registry (once per process, whatever the number
of apps built in it) and `/metrics` answers them all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from litestar.types import Message, Receive, Scope, Send
from prometheus_client import Counter, Gauge, Histogram

from kernelwright.serving.schemas import CompileInfo

APP_NAME = "kernelwright"
CLIENT_CLOSED = 499  # the client closed its connection before any answer was sent
UNMATCHED = "unmatched"  # the path label of a request no route matched (its own path would be unbounded)
_HTTP_LABELS = ["app_name", "method", "path", "status_code"]
HTTP_REQUESTS = Counter("kernelwright_http_requests_total", "HTTP requests, by route and the status answered "
                        "(499: the client closed its connection before an answer)", _HTTP_LABELS)
HTTP_SECONDS = Histogram("kernelwright_http_request_duration_seconds", "Seconds from a request's arrival to its "
                         "answer's last byte (or to its client going away)", _HTTP_LABELS)

QUEUE_DEPTH = Gauge("kernelwright_queue_depth", "Requests in flight on /v1 routes (generating or waiting)")
TOKENS = Counter("kernelwright_tokens_generated_total", "Completion tokens generated")
PROMPT_TOKENS = Counter("kernelwright_prompt_tokens_total", "Prompt tokens read")
COMPILES = Counter("kernelwright_compile_checks_total", "Compile checks of generated candidates, by outcome",
                   ["result"])
REPAIRS = Counter("kernelwright_repairs_total", "Candidates regenerated with their compiler log")
RELOADS = Counter("kernelwright_model_reloads_total", "Polls of the registry alias that swapped in a new "
                  "version (swapped) or failed to (failed)", ["result"])
CANCELLED = Counter("kernelwright_requests_cancelled_total", "Requests cancelled because their client went away")
ENGINE_SEQUENCES = Gauge("kernelwright_engine_sequences", "Sequences (candidates) in the continuous-batching "
                         "engine: prefilling, decoding or waiting for cache room")
REJECTED = Counter("kernelwright_queue_rejections_total", "Requests answered 503 because the queue was full")

_lock = threading.Lock()
_tally = {"ok": 0, "checked": 0}


def _pass_rate() -> float:
    with _lock:
        return _tally["ok"] / _tally["checked"] if _tally["checked"] else 0.0


PASS_RATE = Gauge("kernelwright_compile_pass_rate", "Share of compile-checked candidates that compiled "
                  "(since start; 0 before the first check)")
PASS_RATE.set_function(_pass_rate)


def outcome(info: CompileInfo) -> str:
    if info.ok:
        return "ok"
    statuses = {info.device.status, info.host.status}
    return "failed" if "failed" in statuses else "unavailable"


def record_compiles(infos: list[CompileInfo]) -> None:
    for info in infos:
        result = outcome(info)
        COMPILES.labels(result).inc()
        if result != "unavailable":
            with _lock:
                _tally["checked"] += 1
                _tally["ok"] += result == "ok"


def record_tokens(prompt: int, completion: int) -> None:
    PROMPT_TOKENS.inc(prompt)
    TOKENS.inc(completion)


async def observe(scope: Scope, receive: Receive, send: Send,
                  app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
    """Run `app` on one HTTP request and count it once, with the status it was answered."""
    started = time.perf_counter()
    status: int | None = None
    gone = False

    async def receiving() -> Message:
        nonlocal gone
        message: Any = await receive()
        gone = gone or message["type"] == "http.disconnect"
        return message

    async def sending(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    try:
        await app(scope, receiving, sending)
    finally:
        answered = status if status is not None else CLIENT_CLOSED if gone else 500
        labels = (APP_NAME, scope.get("method", ""), scope.get("path_template", UNMATCHED), str(answered))
        HTTP_REQUESTS.labels(*labels).inc()
        HTTP_SECONDS.labels(*labels).observe(time.perf_counter() - started)
