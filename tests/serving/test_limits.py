"""Keys, body size, the in-flight bound, readiness, request ids, metrics and the schema."""

from __future__ import annotations

import threading

import pytest
from litestar.testing import TestClient

from kernelwright.serving.app import create_app
from kernelwright.serving.backend import ScriptedBackend
from kernelwright.serving.config import KEYS_ENV, ServeConfig
from kernelwright.serving.schemas import ModelInfo
from tests.serving.backends import GatedBackend

BODY = {"instruction": "Write a ReLU kernel.", "compile_check": False}


def test_keys_guard_every_v1_route_and_leave_health_open(client_for, good_text) -> None:
    with client_for([good_text], api_keys=["s3cret"]) as (client, _):
        missing = client.post("/v1/kernels/generate", json=BODY)
        wrong = client.get("/v1/models", headers={"Authorization": "Bearer nope"})
        right = client.post("/v1/kernels/generate", json=BODY, headers={"Authorization": "Bearer s3cret"})
        open_routes = [client.get(p).status_code for p in ("/healthz", "/readyz", "/metrics")]
    assert missing.status_code == 401 and wrong.status_code == 401 and right.status_code == 200
    assert missing.headers["www-authenticate"] == "Bearer" and "s3cret" not in missing.text
    assert open_routes == [200, 200, 200]


def test_keys_from_the_environment(client_for, good_text, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEYS_ENV, " a1 , b2 ")
    with client_for([good_text]) as (client, _):
        assert client.get("/v1/models").status_code == 401
        assert client.get("/v1/models", headers={"Authorization": "Bearer b2"}).status_code == 200


def test_a_body_over_the_limit_is_a_413(client_for, good_text) -> None:
    with client_for([good_text], max_body_bytes=2000) as (client, _):
        r = client.post("/v1/kernels/generate", json={"instruction": "x" * 5000})
    assert r.status_code == 413


def test_a_full_queue_answers_503_with_retry_after(good_text) -> None:
    backend = GatedBackend([good_text])
    with TestClient(app=create_app(ServeConfig(max_queue=1, retry_after_s=3), backend)) as client:
        results: list[int] = []
        first = threading.Thread(target=lambda: results.append(client.post("/v1/kernels/generate",
                                                                            json=BODY).status_code))
        first.start()
        assert backend.entered.wait(10)
        second = client.post("/v1/kernels/generate", json=BODY)
        health = client.get("/healthz")
        backend.gate.set()
        first.join(10)
    assert results == [200] and health.status_code == 200
    assert second.status_code == 503 and second.headers["retry-after"] == "3"
    assert "in flight" in second.json()["detail"]


def test_readyz_is_503_until_the_model_is_loaded(good_text) -> None:
    release = threading.Event()

    def loader():  # type: ignore[no-untyped-def]
        release.wait(10)
        return ScriptedBackend([good_text]), ModelInfo(name="kernelwright-coder", version="4", alias="champion")

    with TestClient(app=create_app(ServeConfig(), loader=loader)) as client:
        before = client.get("/readyz")
        busy = client.post("/v1/kernels/generate", json=BODY)
        assert client.get("/healthz").status_code == 200
        release.set()
        for _ in range(200):
            if (after := client.get("/readyz")).status_code == 200:
                break
            threading.Event().wait(0.01)
        served = client.post("/v1/kernels/generate", json=BODY)
    assert before.status_code == 503 and before.headers["x-kernelwright-model-version"] == "loading"
    assert busy.status_code == 503 and "retry-after" in busy.headers
    assert after.status_code == 200 and after.json()["version"] == "4"
    assert served.json()["model"] == {"name": "kernelwright-coder", "version": "4", "alias": "champion",
                                      "run_id": None}
    assert served.headers["x-kernelwright-model-version"] == "4"


def test_a_failed_load_keeps_readyz_at_503_with_the_reason() -> None:
    def loader():  # type: ignore[no-untyped-def]
        raise RuntimeError("no weights here")

    with TestClient(app=create_app(ServeConfig(), loader=loader)) as client:
        for _ in range(100):
            r = client.get("/readyz")
            if r.json()["status"] == "failed":
                break
            threading.Event().wait(0.01)
    assert r.status_code == 503 and "no weights here" in r.json()["detail"]


def test_request_ids_are_echoed_or_made(client_for, good_text) -> None:
    with client_for([good_text]) as (client, _):
        echoed = client.get("/healthz", headers={"X-Request-Id": "abc-123"})
        made = client.get("/nowhere")
        unsafe = client.get("/healthz", headers={"X-Request-Id": "bad id\twith spaces"})
        error = client.post("/v1/kernels/generate", json={}, headers={"X-Request-Id": "e-1"})
    assert echoed.headers["x-request-id"] == "abc-123"
    assert made.status_code == 404 and len(made.headers["x-request-id"]) == 32
    assert unsafe.headers["x-request-id"] != "bad id\twith spaces"
    assert error.status_code == 400 and error.headers["x-request-id"] == "e-1"
    assert echoed.headers["x-kernelwright-model-version"] == "local"


@pytest.mark.usefixtures("fake_compile")
def test_metrics_count_requests_tokens_queue_and_compiles(client_for, good_text) -> None:
    with client_for([good_text]) as (client, _):
        client.post("/v1/kernels/generate", json={"instruction": "x"})
        text = client.get("/metrics").text
    for series in ("kernelwright_http_requests_total", "kernelwright_http_request_duration_seconds",
                   "kernelwright_queue_depth", "kernelwright_tokens_generated_total",
                   "kernelwright_compile_checks_total{result=\"ok\"}", "kernelwright_compile_pass_rate"):
        assert series in text, series


def test_the_openapi_schema_documents_the_routes(client_for, good_text) -> None:
    with client_for([good_text]) as (client, _):
        schema = client.get("/schema/openapi.json").json()
    assert {"/v1/kernels/generate", "/v1/chat/completions", "/v1/completions", "/v1/models", "/healthz",
            "/readyz"} <= set(schema["paths"])
