"""An OpenAI-compatible engine in the test process (an httpx.MockTransport), for the openai backend's tests."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from litestar.testing import TestClient

from kernelwright.serving.app import create_app
from kernelwright.serving.config import ServeConfig
from kernelwright.serving.openai_startup import engine_loader

MODEL = "engine-model"
# given the request and its JSON body: an answer in place of the engine's own, or None
Fault = Callable[[httpx.Request, dict[str, Any]], httpx.Response | None]


@dataclass
class FakeEngine:
    """Answers `texts` in order (chat and completions, JSON and SSE) and keeps every request it got.

    `usage: False` leaves the usage out; `done_marker: False` ends streams without `data: [DONE]`
    (as `transformers serve` does); `fault` answers instead of the engine; `down_for` calls fail to
    connect first (an engine still starting)."""

    texts: list[str] = field(default_factory=lambda: ["hello kernel world"])
    models: list[str] = field(default_factory=lambda: [MODEL])
    usage: bool = True
    done_marker: bool = True
    no_completions: bool = False
    fault: Fault | None = None
    down_for: int = 0
    requests: list[tuple[str, dict[str, Any], httpx.Headers]] = field(default_factory=list)
    _next: itertools.count[int] = field(default_factory=itertools.count)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [body for p, body, _ in self.requests if p == path]

    def handle(self, request: httpx.Request) -> httpx.Response:
        if self.down_for > 0:
            self.down_for -= 1
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        body = json.loads(request.content) if request.content else {}
        self.requests.append((request.url.path, body, request.headers))
        if self.fault is not None and (answer := self.fault(request, body)) is not None:
            return answer
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"object": "list", "data": [{"id": m, "object": "model"} for m in
                                                                         self.models]})
        chat = request.url.path == "/v1/chat/completions"
        if not chat and (self.no_completions or request.url.path != "/v1/completions"):
            return httpx.Response(404, json={"detail": "Not Found"})
        text = self.texts[next(self._next) % len(self.texts)]
        finish = "length" if len(text.split()) >= body.get("max_tokens", 10**6) else "stop"
        usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18} if self.usage else None
        if body.get("stream"):
            return httpx.Response(200, headers={"content-type": "text/event-stream"},
                                  content=self._sse(text, chat, finish, usage))
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
        answer = {"id": "x", "object": "chat.completion" if chat else "text_completion", "created": int(time.time()),
                  "model": body.get("model"), "choices": [choice], **({"usage": usage} if usage else {})}
        return httpx.Response(200, json=answer)

    def _sse(self, text: str, chat: bool, finish: str, usage: dict[str, int] | None) -> bytes:
        words = text.split(" ")
        pieces = [w if i == 0 else " " + w for i, w in enumerate(words)]

        def chunk(piece: str | None, reason: str | None = None) -> dict[str, Any]:
            if chat:
                choice: dict[str, Any] = {"index": 0, "delta": {} if piece is None else {"content": piece}}
            else:
                choice = {"index": 0, "text": piece or ""}
            return {"id": "x", "object": "chunk", "choices": [{**choice, "finish_reason": reason}]}

        events = [chunk(p) for p in pieces] + [chunk(None, finish)]
        if usage:
            events.append({"id": "x", "object": "chunk", "choices": [], "usage": usage})
        lines = [": a comment line", *(f"data: {json.dumps(e)}\n" for e in events)]
        if self.done_marker:
            lines.append("data: [DONE]\n")
        return "\n".join(lines).encode() + b"\n"


def engine_client(engine: FakeEngine, compile_cache: str, **config: Any) -> TestClient[Any]:
    """A TestClient of kernelwright serving with the openai backend over `engine` (enter it to start)."""
    cfg = ServeConfig(**{"backend": "openai", "backend_url": "http://engine.test:8001", "compile_host": False,
                         "compile_cache_dir": compile_cache, **config})
    return TestClient(app=create_app(cfg, loader=engine_loader(cfg, engine.transport())))


def wait_ready(client: TestClient[Any]) -> httpx.Response:
    """/readyz once it is no longer loading (200 ready, or 503 failed)."""
    for _ in range(500):
        r = client.get("/readyz")
        if r.status_code == 200 or r.json()["status"] != "loading":
            return r
        time.sleep(0.01)
    return r
