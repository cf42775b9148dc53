"""Request bodies nested too deep, sent too slowly or cut short; every answer counted once in the metrics."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient
from prometheus_client import REGISTRY

from kernelwright.serving.app import create_app
from kernelwright.serving.body_limits import MAX_JSON_DEPTH, nesting_depth
from kernelwright.serving.config import ServeConfig
from tests.serving.backends import GatedBackend

ROUTES = ["/v1/kernels/generate", "/v1/chat/completions", "/v1/completions"]
BODY = {"instruction": "Write a ReLU kernel.", "compile_check": False}
DEEP = 100_000


def _deep(opener: bytes, closer: bytes, depth: int = DEEP) -> bytes:
    return opener * depth + closer * depth


DEEP_BODIES = {
    "arrays": _deep(b"[", b"]"),
    "objects": b'{"a":' * DEEP + b"1" + b"}" * DEEP,
    "unclosed": b"[" * DEEP,
    "in a field": b'{"instruction": ' + _deep(b"[", b"]") + b"}",
    "in the reference code": b'{"reference_code": {"x": ' + _deep(b"[", b"]") + b"}}",
    "in a chat message": b'{"messages": [{"role": "user", "content": ' + _deep(b'{"c": ', b"}", DEEP // 2)[:-1]
                         + b"}]}",
    "in a message list": b'{"messages": ' + _deep(b"[", b"]") + b"}",
    "in the prompt": b'{"prompt": ' + _deep(b"[", b"]") + b', "max_tokens": 5}',
    "mixed": b'{"a": ' + b'[{"b": ' * (DEEP // 2) + b"0" + b"}]" * (DEEP // 2) + b"}",
}


def _count(path: str, status: int, method: str = "POST") -> float:
    labels = {"app_name": "kernelwright", "method": method, "path": path, "status_code": str(status)}
    return REGISTRY.get_sample_value("kernelwright_http_requests_total", labels) or 0.0


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", list(DEEP_BODIES))
def test_deeply_nested_bodies_are_a_400_naming_the_nesting(client_for, good_text, route: str, name: str) -> None:
    with client_for([good_text]) as (client, _):
        r = client.post(route, content=DEEP_BODIES[name], headers={"content-type": "application/json"})
    assert r.status_code == 400, (r.status_code, r.text[:300])
    error = r.json()["error"]
    assert error["param"] == "body" and "nested" in error["message"] and str(MAX_JSON_DEPTH) in error["message"]


def test_any_content_type_and_route_is_checked(client_for, good_text) -> None:
    with client_for([good_text]) as (client, _):
        plain = client.post("/v1/chat/completions", content=DEEP_BODIES["arrays"],
                            headers={"content-type": "text/plain"})
        models = client.request("GET", "/v1/models", content=DEEP_BODIES["objects"])
    assert plain.status_code == 400 and models.status_code == 400, (plain.text[:200], models.text[:200])


def test_nesting_up_to_the_limit_is_left_to_the_schema(client_for, good_text) -> None:
    """Brackets inside strings do not count, and a body at the limit gets its ordinary answer."""
    code = "x[i] = {{[[" * 5_000
    at_limit = {"messages": [{"role": "user", "content": "x"}], "tools": _nest(MAX_JSON_DEPTH - 2)}
    with client_for([good_text]) as (client, _):
        strings = client.post("/v1/kernels/generate", json={"instruction": code, "compile_check": False})
        deep_ok = client.post("/v1/chat/completions", json=at_limit)
    assert strings.status_code == 200, strings.text[:300]
    assert deep_ok.status_code == 400 and "nested" not in deep_ok.json()["error"]["message"], deep_ok.text[:300]


def _nest(depth: int) -> Any:
    value: Any = 0
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab'),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\'), inner,
                                                                                max_size=3), max_leaves=30)


def _depth(value: Any) -> int:
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
    return 0 if children is None else 1 + max((_depth(c) for c in children), default=0)


@given(JSON)
@settings(max_examples=300, deadline=None)
def test_nesting_depth_is_the_depth_a_decoder_reaches(value: Any) -> None:
    assert nesting_depth(json.dumps(value).encode()) == _depth(value)


def test_an_unterminated_string_hides_the_brackets_after_it() -> None:
    assert nesting_depth(b'{"a": "[[[[\\"' + b"[" * 100) == 1
    assert nesting_depth(b'["\\\\", [[' + b"]]]") == 3


async def _asgi(app: Any, path: str, messages: list[dict[str, Any]], then_wait: bool) -> list[dict[str, Any]]:
    """One request over raw ASGI: `messages` from the client, then silence (then_wait) or a disconnect."""
    sent: list[dict[str, Any]] = []
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json"), (b"content-length", b"500"), (b"host", b"test")],
             "client": ("127.0.0.1", 5000), "server": ("test", 80)}

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        if then_wait:
            await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await asyncio.wait_for(app(scope, receive, send), 30)
    return sent


def test_a_body_not_sent_in_time_is_a_408_that_closes_the_connection(good_text) -> None:
    app = create_app(ServeConfig(body_timeout_s=0.2), GatedBackend([good_text]))
    before = _count("/v1/kernels/generate", 408)
    part = [{"type": "http.request", "body": b'{"instruction": "x"', "more_body": True}]
    sent = asyncio.run(_asgi(app, "/v1/kernels/generate", part, then_wait=True))
    start = sent[0]
    assert start["status"] == 408 and (b"connection", b"close") in start["headers"]
    assert b"did not arrive within 0.2 s" in sent[1]["body"]
    assert _count("/v1/kernels/generate", 408) == before + 1


def test_a_client_gone_before_its_body_ends_gets_nothing_and_counts_as_499(good_text) -> None:
    backend = GatedBackend([good_text])
    app = create_app(ServeConfig(), backend)
    before = [_count("/v1/kernels/generate", s) for s in (499, 500)]
    part = [{"type": "http.request", "body": b'{"instruction": "x"', "more_body": True}]
    sent = asyncio.run(_asgi(app, "/v1/kernels/generate", part, then_wait=False))
    assert sent == [] and not backend.entered.is_set()
    assert [_count("/v1/kernels/generate", s) for s in (499, 500)] == [before[0] + 1, before[1]]


def test_a_client_gone_during_generation_counts_as_499(good_text) -> None:
    backend = GatedBackend([good_text])
    app = create_app(ServeConfig(), backend)
    before = _count("/v1/kernels/generate", 499)
    body = [{"type": "http.request", "body": json.dumps(BODY).encode(), "more_body": False}]

    async def scenario() -> list[dict[str, Any]]:
        waiter = asyncio.ensure_future(asyncio.to_thread(backend.entered.wait, 10))
        sent = await _asgi(app, "/v1/kernels/generate", body, then_wait=False)
        await waiter
        return sent

    sent = asyncio.run(scenario())
    backend.gate.set()
    assert sent == [] and _count("/v1/kernels/generate", 499) == before + 1


def test_every_answer_is_counted_once_with_its_status(good_text) -> None:
    """Rejections made around the handlers (queue, rate limit, key, size) count with the status sent."""
    backend = GatedBackend([good_text])
    cfg = ServeConfig(max_queue=1, rate_limit_per_minute=5, max_body_bytes=2_000, api_keys=["k"])
    gen, models, key = "/v1/kernels/generate", "/v1/models", {"Authorization": "Bearer k"}
    watched = [("POST", gen, s) for s in (200, 400, 401, 413, 429, 503)] + [
        ("GET", models, s) for s in (200, 429)] + [("GET", "/readyz", 503), ("GET", "unmatched", 404)]
    before = {w: _count(w[1], w[2], w[0]) for w in watched}
    with TestClient(app=create_app(cfg, backend)) as client:
        held = threading.Thread(target=lambda: client.post(gen, json=BODY, headers=key))
        held.start()
        assert backend.entered.wait(10)
        statuses = [client.post(gen, json=BODY, headers=key).status_code]  # the queue is full
        backend.gate.set()
        held.join(10)
        statuses += [client.post(gen, json=BODY).status_code,  # no key
                     client.post(gen, json={"instruction": "x" * 5_000}, headers=key).status_code,  # too large
                     client.post(gen, json={"n": "x"}, headers=key).status_code,
                     *(client.get(models, headers=key).status_code for _ in range(3)),  # the 6th this minute
                     client.get("/nowhere").status_code]
        client.app.state.draining = True
        statuses.append(client.get("/readyz").status_code)
        client.app.state.draining = False
    assert statuses == [503, 401, 413, 400, 200, 200, 429, 404, 503]
    gained = {w: _count(w[1], w[2], w[0]) - before[w] for w in watched}
    assert gained == {("POST", gen, 200): 1, ("POST", gen, 400): 1, ("POST", gen, 401): 1, ("POST", gen, 413): 1,
                      ("POST", gen, 429): 0, ("POST", gen, 503): 1, ("GET", models, 200): 2, ("GET", models, 429): 1,
                      ("GET", "/readyz", 503): 1, ("GET", "unmatched", 404): 1}
