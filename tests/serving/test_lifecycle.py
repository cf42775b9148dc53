"""A client that goes away cancels its (non-streaming) generation; shutdown drains requests in flight."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

from litestar.testing import TestClient

from kernelwright.serving.app import create_app
from kernelwright.serving.config import ServeConfig
from kernelwright.serving.hf import HFServingBackend
from tests.serving.backends import GatedBackend

BODY = {"instruction": "Write a ReLU kernel.", "compile_check": False}


def _scope(path: str) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "headers": [(b"content-type", b"application/json"), (b"host", b"test")],
            "client": ("127.0.0.1", 5000), "server": ("test", 80)}


async def _disconnecting_call(app: Any, backend: GatedBackend) -> tuple[list[dict[str, Any]], float]:
    """The request over raw ASGI: its body, then the client goes away once generation has started."""
    sent: list[dict[str, Any]] = []
    body = json.dumps(BODY).encode()
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        while not backend.entered.is_set():
            await asyncio.sleep(0.01)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    started = time.monotonic()
    await asyncio.wait_for(app(_scope("/v1/kernels/generate"), receive, send), 10)
    took = time.monotonic() - started
    backend.gate.set()  # let the worker thread the cancelled wait left behind end
    return sent, took


def test_a_client_that_goes_away_cancels_its_generation(good_text: str) -> None:
    backend = GatedBackend([good_text])
    app = create_app(ServeConfig(), backend)
    sent, took = asyncio.run(_disconnecting_call(app, backend))
    assert backend.cancelled.is_set() and not backend.prompts  # the generation was stopped, never finished
    assert took < 5 and not any(m["type"] == "http.response.body" for m in sent)


def test_a_client_that_stays_gets_its_answer(client_for, good_text: str) -> None:
    with client_for([good_text]) as (client, backend):
        r = client.post("/v1/kernels/generate", json=BODY)
    assert r.status_code == 200 and len(backend.prompts) == 1


def test_shutdown_drains_requests_in_flight(good_text: str) -> None:
    backend = GatedBackend([good_text])
    client = TestClient(app=create_app(ServeConfig(drain_timeout_s=10), backend))
    client.__enter__()
    answers: list[Any] = []
    request = threading.Thread(target=lambda: answers.append(client.post("/v1/kernels/generate", json=BODY)))
    request.start()
    assert backend.entered.wait(10)
    shutdown = threading.Thread(target=lambda: client.__exit__(None, None, None))
    shutdown.start()
    time.sleep(0.3)
    draining = client.app.state.draining
    assert shutdown.is_alive() and not answers  # shutdown waits for the request in flight
    backend.gate.set()
    request.join(10)
    shutdown.join(10)
    assert draining and not shutdown.is_alive() and answers[0].status_code == 200


def test_a_request_still_running_at_the_drain_deadline_answers_503(good_text: str) -> None:
    backend = GatedBackend([good_text])  # never released while the app shuts down
    client = TestClient(app=create_app(ServeConfig(drain_timeout_s=0.2, retry_after_s=4), backend))
    client.__enter__()
    answers: list[Any] = []
    request = threading.Thread(target=lambda: answers.append(client.post("/v1/kernels/generate", json=BODY)))
    request.start()
    assert backend.entered.wait(10)
    client.__exit__(None, None, None)
    request.join(10)
    backend.gate.set()  # let the worker thread the cancelled wait left behind end
    cut = answers[0]
    assert cut.status_code == 503 and cut.headers["retry-after"] == "4" and backend.cancelled.is_set()
    assert "shut down before this request was answered" in cut.json()["error"]["message"]
    assert not client.app.state.handlers and client.app.state.in_flight == 0


def test_a_new_request_while_draining_is_a_503(client_for, good_text: str) -> None:
    with client_for([good_text]) as (client, _):
        client.app.state.draining = True
        r = client.post("/v1/kernels/generate", json=BODY)
        ready = client.get("/readyz")
        client.app.state.draining = False
    assert r.status_code == 503 and "shutting down" in r.json()["detail"] and "retry-after" in r.headers
    assert ready.status_code == 503 and ready.json()["status"] == "draining"
    assert r.headers["connection"] == ready.headers["connection"] == "close"  # keep-alive clients move on


def test_a_cancelled_hf_generation_frees_the_worker(tiny_model_dir: Path) -> None:
    from kernelwright.models import load_base_model, load_tokenizer
    from kernelwright.serving.backend import Sampling

    backend = HFServingBackend(load_base_model(tiny_model_dir).eval(), load_tokenizer(tiny_model_dir))
    backend.tokenizer.eos_token_id = None  # nothing ends the generation but max_new_tokens or the stop

    async def scenario() -> float:
        job = asyncio.ensure_future(backend.generate(["__global__ void k("], Sampling(max_new_tokens=3000)))
        await asyncio.sleep(0.3)
        job.cancel()
        cancelled = time.monotonic()
        await backend.generate(["x"], Sampling(max_new_tokens=1))  # the worker is free again
        return time.monotonic() - cancelled

    assert asyncio.run(scenario()) < 1.0


def test_a_client_that_leaves_after_its_whole_answer_is_no_cancellation() -> None:
    """A stream's client closes once the last chunk is out, while the handler still tidies up."""
    from kernelwright.serving import metrics
    from kernelwright.serving.lifecycle import CancelOnDisconnect

    tidied: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"done", "more_body": False})
        await asyncio.sleep(0.05)  # after the answer: the client is gone by now
        tidied.append(True)

    async def main() -> list[dict[str, Any]]:
        messages = iter([{"type": "http.request", "body": b"", "more_body": False}, {"type": "http.disconnect"}])
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return next(messages)

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "GET", "path": "/x", "app": create_app(ServeConfig(), GatedBackend([]))}
        await CancelOnDisconnect().handle(scope, receive, send, app)  # type: ignore[arg-type]
        return sent

    before = metrics.CANCELLED._value.get()
    sent = asyncio.run(main())
    assert tidied == [True] and sent[-1]["body"] == b"done"
    assert metrics.CANCELLED._value.get() == before
