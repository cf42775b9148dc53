"""`kernelwright serve` in a subprocess with the scripted backend, driven by the official openai client."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

openai = pytest.importorskip("openai")
KEY = "test-key-123"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, good_text: str) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("live")
    script = folder / "texts.json"
    script.write_text(json.dumps([good_text]))
    port = _free_port()
    env = {**os.environ, "KERNELWRIGHT_API_KEYS": KEY}
    cmd = [sys.executable, "-m", "kernelwright.cli", "serve", "--backend", f"scripted:{script}", "--port",
           str(port), "--no_compile_host", "--compile_cache_dir", str(folder / "cache"), "--workdir", str(folder)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, proc)
        yield base
    finally:
        proc.terminate()
        proc.wait(15)


def _wait_ready(base: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited: {proc.stdout.read() if proc.stdout else ''}")
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("the server did not become ready in 60 s")


def test_openai_client_chat_completion_with_compile_result(server: str, good_text: str) -> None:
    client = openai.OpenAI(base_url=f"{server}/v1", api_key=KEY)
    (model,) = client.models.list().data
    assert client.models.retrieve(model.id).id == model.id
    answer = client.chat.completions.create(model=model.id, seed=1, temperature=0.2, max_tokens=64,
                                            messages=[{"role": "user", "content": [{"type": "text", "text": "ELU"}]}])
    choice = answer.choices[0]
    assert choice.message.content == good_text and choice.finish_reason == "stop"
    extra = choice.model_extra["kernelwright"]
    assert "class ModelNew" in extra["code"] and extra["compile"]["device"]["status"] in ("ok", "unavailable")
    assert answer.usage is not None and answer.usage.completion_tokens > 0


def test_openai_client_streams(server: str, good_text: str) -> None:
    client = openai.OpenAI(base_url=f"{server}/v1", api_key=KEY)
    chunks = list(client.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "x"}],
                                                 stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == good_text and chunks[-1].choices[0].finish_reason == "stop"
    assert "kernelwright" in chunks[-1].choices[0].model_extra
    completion = client.completions.create(model="scripted", prompt="```python\n", stream=True)
    assert "".join(c.choices[0].text for c in completion) == good_text


def test_openai_client_without_the_key_is_refused(server: str) -> None:
    client = openai.OpenAI(base_url=f"{server}/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        client.models.list()


def test_kernel_route_and_headers_over_http(server: str, seed_reference: str) -> None:
    r = httpx.post(f"{server}/v1/kernels/generate", json={"reference_code": seed_reference},
                   headers={"Authorization": f"Bearer {KEY}", "X-Request-Id": "live-1"}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.headers["x-request-id"] == "live-1" and r.headers["x-kernelwright-model-version"] == "0"
    assert r.json()["model"]["name"] == "scripted"
    assert httpx.get(f"{server}/healthz").status_code == 200
    assert "kernelwright_http_requests_total" in httpx.get(f"{server}/metrics").text
