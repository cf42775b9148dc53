"""The openai backend against an in-process fake engine: what it sends, what it answers, how it fails."""

from __future__ import annotations

import json
import logging
import socket
from typing import Any

import httpx
import pytest

from kernelwright.config import parse_config
from kernelwright.errors import UsageError
from kernelwright.serve import check_serve_config
from kernelwright.serving import openai_startup
from kernelwright.serving.config import ServeConfig
from tests.serving.fake_engine import MODEL, FakeEngine, engine_client, wait_ready

pytestmark = pytest.mark.usefixtures("fake_compile")
CHAT = [{"role": "user", "content": "Write ModelNew for ELU"}]


def _events(text: str) -> list[Any]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


def test_chat_candidates_are_one_request_each_with_the_engines_usage(compile_cache: str) -> None:
    engine = FakeEngine(texts=["first answer", "second answer"])
    with engine_client(engine, compile_cache) as client:
        ready = wait_ready(client)
        r = client.post("/v1/chat/completions", json={"model": MODEL, "n": 2, "seed": 5, "temperature": 0.5,
                                                      "top_p": 0.9, "max_tokens": 32, "messages": CHAT})
        models = client.get("/v1/models").json()
    assert ready.json() == {"status": "ready", "model": MODEL, "version": None}
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == MODEL and models["data"][0]["id"] == MODEL
    assert sorted(c["message"]["content"] for c in body["choices"]) == ["first answer", "second answer"]
    assert body["usage"] == {"prompt_tokens": 11, "completion_tokens": 14, "total_tokens": 25}  # the engine's
    sent = engine.bodies("/v1/chat/completions")
    assert sorted(b["seed"] for b in sent) == [5, 6]  # candidate i gets seed + i: the candidates differ
    assert all(b["messages"] == CHAT and b["model"] == MODEL and b["max_tokens"] == 32 and b["temperature"] == 0.5
               and b["top_p"] == 0.9 and "n" not in b for b in sent)


def test_kernel_route_names_the_engines_model_and_repairs_through_it(compile_cache: str, seed_reference: str,
                                                                     good_text: str, broken_text: str) -> None:
    engine = FakeEngine(texts=[broken_text, good_text])
    with engine_client(engine, compile_cache) as client:
        wait_ready(client)
        r = client.post("/v1/kernels/generate", json={"reference_code": seed_reference, "max_new_tokens": 64})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == {"name": MODEL, "version": None, "alias": None, "run_id": None}
    (candidate,) = body["candidates"]
    assert candidate["compile"]["ok"] is True and candidate["repairs"] == 1
    repair = engine.bodies("/v1/chat/completions")[1]["messages"]
    assert repair[-1]["role"] == "user" and "undefined_name_in_kernel" in repair[-1]["content"]
    assert "seed" not in engine.bodies("/v1/chat/completions")[0]  # no seed asked: none sent


def test_raw_prompts_go_to_completions_and_counts_fall_back_to_words(compile_cache: str) -> None:
    engine = FakeEngine(texts=["one two three"], usage=False)
    with engine_client(engine, compile_cache) as client:
        wait_ready(client)
        r = client.post("/v1/completions", json={"model": MODEL, "prompt": "__global__ void k(", "max_tokens": 3})
    assert r.status_code == 200, r.text
    (choice,) = r.json()["choices"]
    assert choice["text"] == "one two three" and choice["finish_reason"] == "length"
    assert r.json()["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
    assert engine.bodies("/v1/completions")[0]["prompt"] == "__global__ void k("


def test_an_engine_without_completions_gets_raw_prompts_as_chat(compile_cache: str) -> None:
    engine = FakeEngine(no_completions=True)
    with engine_client(engine, compile_cache) as client:
        wait_ready(client)
        first = client.post("/v1/completions", json={"model": MODEL, "prompt": "hi"})
        second = client.post("/v1/completions", json={"model": MODEL, "prompt": "again"})
    assert first.status_code == second.status_code == 200
    assert [b["messages"] for b in engine.bodies("/v1/chat/completions")] == [
        [{"role": "user", "content": "hi"}], [{"role": "user", "content": "again"}]]
    assert len(engine.bodies("/v1/completions")) == 1  # learnt once


@pytest.mark.parametrize("done_marker", [True, False], ids=["done", "no-done"])
def test_streams_relay_the_engines_deltas_then_the_compile_result(compile_cache: str, done_marker: bool) -> None:
    engine = FakeEngine(texts=["a streamed kernel answer"], done_marker=done_marker)
    with engine_client(engine, compile_cache) as client:
        wait_ready(client)
        chat = client.post("/v1/chat/completions", json={"model": MODEL, "messages": CHAT, "stream": True, "n": 2})
        text = client.post("/v1/completions", json={"model": MODEL, "prompt": "x", "stream": True})
    assert chat.status_code == 200 and chat.text.rstrip().endswith("data: [DONE]")
    chunks = _events(chat.text)
    for index in (0, 1):
        mine = [c["choices"][0] for c in chunks if c["choices"][0]["index"] == index]
        assert "".join(c["delta"].get("content", "") for c in mine) == "a streamed kernel answer"
        assert mine[-1]["finish_reason"] == "stop" and "kernelwright" in mine[-1]
    assert "".join(c["choices"][0]["text"] for c in _events(text.text)) == "a streamed kernel answer"
    sent = engine.bodies("/v1/chat/completions")[0]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


def _answer(status: int, body: Any = None, text: str | None = None) -> httpx.Response:
    return httpx.Response(status, text=text) if text is not None else httpx.Response(status, json=body)


def _raise(exc: type[httpx.HTTPError]) -> Any:
    def fault(request: httpx.Request, body: dict[str, Any]) -> httpx.Response | None:
        if request.url.path == "/v1/models":
            return None
        raise exc("engine trouble", request=request)

    return fault


def _answers(response: httpx.Response) -> Any:
    return lambda request, body: None if request.url.path == "/v1/models" else response


@pytest.mark.parametrize(("fault", "status", "words"), [
    (_raise(httpx.ConnectError), 503, "cannot be reached"),
    (_raise(httpx.ReadTimeout), 504, "backend_timeout_s"),
    (_raise(httpx.RemoteProtocolError), 502, "broke"),
    (_answers(_answer(500, {"detail": "CUDA out of memory"})), 502, "CUDA out of memory"),
    (_answers(_answer(503, {"error": "cb_worker_dead"})), 503, "cb_worker_dead"),
    (_answers(_answer(429, {"error": {"message": "queue full"}})), 503, "queue full"),
    (_answers(_answer(200, text="<html>hello</html>")), 502, "not an OpenAI"),
    (_answers(_answer(200, {"choices": [{"message": {"content": 3}}]})), 502, "not an OpenAI"),
    (_answers(_answer(404, {"detail": "no such model"})), 502, "no such model"),
    (_answers(_answer(200, text="[" * 100_000 + "]" * 100_000)), 502, "not an OpenAI"),
], ids=["down", "timeout", "broken", "500", "503", "429", "html", "wrong-shape", "404", "too-deep"])
def test_engine_failures_are_clear_gateway_errors(compile_cache: str, fault: Any, status: int, words: str) -> None:
    engine = FakeEngine(fault=fault)
    with engine_client(engine, compile_cache) as client:
        wait_ready(client)
        answers = [client.post("/v1/chat/completions", json={"model": MODEL, "messages": CHAT}),
                   # a stream whose first piece fails answers the status, not a 200
                   client.post("/v1/chat/completions", json={"model": MODEL, "messages": CHAT, "stream": True}),
                   client.post("/v1/kernels/generate", json={"instruction": "a ReLU kernel"})]
    for r in answers:
        assert r.status_code == status, (r.status_code, r.text)
        assert words in r.json()["detail"] and "Traceback" not in r.text and "engine.test:8001" in r.json()["detail"]
        assert ("retry-after" in r.headers) == (status == 503)


def test_a_stream_broken_midway_ends_with_an_error_event(compile_cache: str) -> None:
    def cut(request: httpx.Request, body: dict[str, Any]) -> httpx.Response | None:
        chunk = {"choices": [{"index": 0, "delta": {"content": "half"}, "finish_reason": None}]}
        return None if request.url.path == "/v1/models" else httpx.Response(200, content=(
            f"data: {json.dumps(chunk)}\n\ndata: {{\"error\": \"the worker died\"}}\n\n").encode())

    with engine_client(FakeEngine(fault=cut), compile_cache) as client:
        wait_ready(client)
        r = client.post("/v1/chat/completions", json={"model": MODEL, "messages": CHAT, "stream": True})
    assert r.status_code == 200
    error = _events(r.text)[-1]["error"]
    assert error["type"] == "server_error" and "the worker died" in error["message"]


@pytest.mark.parametrize(("message", "field", "route"), [
    ({"detail": "Unexpected fields in the request: {'seed'}"}, "seed", "/v1/chat/completions"),
    ({"error": {"message": "seed is not supported", "type": "invalid_request_error"}}, "seed", "/v1/kernels/generate"),
    ({"detail": [{"loc": ["body", "top_p"], "msg": "must be < 1"}]}, "top_p", "/v1/chat/completions"),
    ({"error": {"message": "This model's maximum context length is 2048 tokens. However, you requested 4096 "
                           "tokens"}}, "max_new_tokens", "/v1/completions"),
])
def test_a_setting_the_engine_refuses_is_a_400_naming_it(compile_cache: str, message: Any, field: str,
                                                         route: str) -> None:
    engine = FakeEngine(fault=_answers(_answer(422 if "detail" in message else 400, message)))
    body = {"model": MODEL, "messages": CHAT, "prompt": "x", "instruction": "ReLU", "seed": 1, "top_p": 0.5}
    body = {k: v for k, v in body.items() if k in {"/v1/chat/completions": {"model", "messages", "seed", "top_p"},
                                                   "/v1/completions": {"model", "prompt"},
                                                   "/v1/kernels/generate": {"instruction", "seed"}}[route]}
    with engine_client(engine, compile_cache) as client:
        wait_ready(client)
        r = client.post(route, json=body)
        streamed = client.post(route, json={**body, "stream": True}) if route != "/v1/kernels/generate" else r
    for answer in (r, streamed):
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["param"] == field and "the engine refused" in answer.json()["detail"]


def test_an_engine_refusing_stream_options_streams_without_them(compile_cache: str) -> None:
    def picky(request: httpx.Request, body: dict[str, Any]) -> httpx.Response | None:
        if "stream_options" in body:
            return httpx.Response(422, json={"detail": "Unexpected fields in the request: {'stream_options'}"})
        return None

    engine = FakeEngine(fault=picky, usage=False)
    with engine_client(engine, compile_cache) as client:
        wait_ready(client)
        r = client.post("/v1/chat/completions", json={"model": MODEL, "messages": CHAT, "stream": True})
        again = client.post("/v1/chat/completions", json={"model": MODEL, "messages": CHAT, "stream": True})
    assert r.status_code == again.status_code == 200 and _events(again.text)[-1]["choices"][0]["finish_reason"]
    assert ["stream_options" in b for b in engine.bodies("/v1/chat/completions")] == [True, False, False]


def test_the_engines_key_is_sent_never_logged(compile_cache: str, monkeypatch: pytest.MonkeyPatch,
                                             caplog: pytest.LogCaptureFixture) -> None:
    key = "sk-engine-secret-9876"
    monkeypatch.setenv("ENGINE_KEY", key)
    caplog.set_level(logging.DEBUG)
    echo = _answers(_answer(500, {"detail": f"bad things with Bearer {key}"}))
    engine = FakeEngine()
    with engine_client(engine, compile_cache, backend_api_key_env="ENGINE_KEY") as client:
        wait_ready(client)
        ok = client.post("/v1/chat/completions", json={"model": MODEL, "messages": CHAT})
        engine.fault = echo
        failed = client.post("/v1/chat/completions", json={"model": MODEL, "messages": CHAT})
        backend = client.app.state.served.backend
    assert ok.status_code == 200 and failed.status_code == 502
    assert all(headers["authorization"] == f"Bearer {key}" for _, _, headers in engine.requests)
    assert key not in caplog.text and key not in failed.text and "***" in failed.text
    assert key not in repr(backend) and key not in repr(backend.settings)


def test_readiness_waits_for_the_engine(compile_cache: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openai_startup, "RETRY_EVERY_S", 0.01)
    engine = FakeEngine(down_for=3)
    with engine_client(engine, compile_cache) as client:
        ready = wait_ready(client)
        r = client.post("/v1/completions", json={"model": MODEL, "prompt": "x"})
    assert ready.status_code == 200 and r.status_code == 200 and engine.down_for == 0


@pytest.mark.parametrize(("engine", "config", "words"), [
    (FakeEngine(down_for=10**6), {"backend_startup_s": 0}, "was not ready in 0 s"),
    (FakeEngine(models=["a", "b"]), {}, "name one with --backend_model"),
    (FakeEngine(), {"backend_model": "other"}, "not 'other'"),
    (FakeEngine(fault=lambda request, body: _answer(401, {"error": "no"})), {}, "refused the key"),
], ids=["never-up", "several-models", "not-listed", "bad-key"])
def test_an_engine_not_ready_keeps_the_server_unready_with_the_reason(compile_cache: str, engine: FakeEngine,
                                                                     config: dict[str, Any], words: str) -> None:
    with engine_client(engine, compile_cache, **config) as client:
        ready = wait_ready(client)
        r = client.post("/v1/completions", json={"model": MODEL, "prompt": "x"})
    assert ready.status_code == 503 and ready.json()["status"] == "failed" and words in ready.json()["detail"]
    assert r.status_code == 503 and words in r.json()["detail"]


def test_readiness_follows_an_engine_that_goes_away_and_comes_back(compile_cache: str) -> None:
    engine = FakeEngine()
    with engine_client(engine, compile_cache, backend_health_s=0) as client:
        assert wait_ready(client).status_code == 200
        engine.down_for = 10**6  # the engine stops answering after start-up
        down = client.get("/readyz")
        engine.down_for = 0
        engine.models = ["another-model"]  # back, but serving something else
        other = client.get("/readyz")
        engine.models = [MODEL]
        back = client.get("/readyz")
    assert down.status_code == 503 and down.json()["status"] == "engine_down"
    assert "Retry-After" in down.headers and "engine.test" in down.json()["detail"]
    assert other.status_code == 503 and "no longer lists 'engine-model'" in other.json()["detail"]
    assert back.status_code == 200 and back.json()["model"] == MODEL


def test_readiness_trusts_the_engines_answer_for_backend_health_s(compile_cache: str) -> None:
    engine = FakeEngine()
    with engine_client(engine, compile_cache, backend_health_s=3600) as client:
        assert wait_ready(client).status_code == 200
        asked = len(engine.bodies("/v1/models"))
        statuses = [client.get("/readyz").status_code for _ in range(5)]
    assert statuses == [200] * 5 and len(engine.bodies("/v1/models")) <= asked + 1


def test_a_named_model_and_a_base_url_with_v1(compile_cache: str) -> None:
    engine = FakeEngine(models=["a", "b"])
    with engine_client(engine, compile_cache, backend_model="b", backend_url="http://engine.test:8001/v1/") as client:
        assert wait_ready(client).json()["model"] == "b"
        assert client.post("/v1/completions", json={"model": "b", "prompt": "x"}).status_code == 200
    assert engine.bodies("/v1/completions")[0]["model"] == "b"


def test_a_real_closed_port_is_a_503(compile_cache: str) -> None:
    from litestar.testing import TestClient

    from kernelwright.serving.app import create_app
    from kernelwright.serving.openai_backend import EngineSettings, OpenAIBackend
    from kernelwright.serving.schemas import ModelInfo

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    backend = OpenAIBackend(EngineSettings(f"http://127.0.0.1:{port}"), "m")
    cfg = ServeConfig(compile_host=False, compile_cache_dir=compile_cache)
    with TestClient(app=create_app(cfg, backend, model_info=ModelInfo(name="m"))) as client:
        r = client.post("/v1/chat/completions", json={"model": "m", "messages": CHAT})
    assert r.status_code == 503 and "cannot be reached" in r.json()["detail"] and "retry-after" in r.headers


@pytest.mark.parametrize(("argv", "words"), [
    (["--backend", "openai"], "needs --backend_url"),
    (["--backend", "openai", "--backend_url", "localhost:8001"], "must be http://HOST:PORT"),
    (["--backend", "openai", "--backend_url", "http://h:1", "--backend_api_key_env", "sk-123"], "not the key"),
    (["--backend", "openai", "--backend_url", "http://h:1", "--backend_timeout_s", "-1"], "0 or more"),
    (["--backend", "vllm"], "hf, openai or scripted"),
])
def test_bad_engine_settings_are_usage_errors(argv: list[str], words: str) -> None:
    with pytest.raises(UsageError, match=words):
        parse_config(ServeConfig, argv, "kernelwright serve")


def test_flags_with_dashes_and_the_preflight(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = parse_config(ServeConfig, ["--backend", "openai", "--backend-url", "http://u:pw@h:1", "--backend-model",
                                     "m", "--backend-api-key-env", "NOT_SET_KEY_VAR"], "kernelwright serve")
    assert (cfg.backend_url, cfg.backend_model, cfg.backend_api_key_env) == ("http://u:pw@h:1", "m", "NOT_SET_KEY_VAR")
    monkeypatch.delenv("NOT_SET_KEY_VAR", raising=False)
    with pytest.raises(UsageError, match="NOT_SET_KEY_VAR, which is not set"):
        check_serve_config(cfg)
    monkeypatch.setenv("NOT_SET_KEY_VAR", "k")
    assert check_serve_config(cfg) == "m of the OpenAI-compatible engine at http://u:***@h:1"
