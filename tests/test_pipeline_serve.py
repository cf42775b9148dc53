"""End to end on a CPU: `kernelwright pipeline` on the base-model code's micro base (LFM2's shape, as the
pipeline's own base), then `kernelwright serve` of what it registered, in a subprocess on its defaults
(no --batching, no --model), driven by the official openai client and the kernel route over HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from kernelwright.cli import main
from kernelwright.seed import load_seed_tasks
from tests.serving.pipeline_model import micro_base

openai = pytest.importorskip("openai")
READY_S = 300  # loading a model on a busy 2-core machine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(base: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the server exited: {log.read_text(errors='replace')[-3000:]}"
        try:
            r = httpx.get(f"{base}/readyz", timeout=2)
        except httpx.TransportError:
            time.sleep(0.25)
            continue
        if r.status_code == 200:
            return
        assert r.json().get("status") == "loading", r.text  # never "failed"
        time.sleep(0.25)
    raise AssertionError(f"not ready in {READY_S} s: {log.read_text(errors='replace')[-3000:]}")


@pytest.mark.slow
def test_serve_answers_with_the_model_the_pipeline_made(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    workdir = tmp_path / "kw"
    assert main(["pipeline", "--workdir", str(workdir), "--base-model", str(micro_base(tmp_path_factory)),
                 "--max-steps", "2", "--max-new-tokens", "8", "--max-length", "512"]) == 0
    port, log = _free_port(), tmp_path / "serve.log"
    cmd = [sys.executable, "-m", "kernelwright.cli", "serve", "--workdir", str(workdir), "--port", str(port),
           "--no_compile_host", "--compile_cache_dir", str(tmp_path / "compile-cache"), "--reload_interval_s", "0"]
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "KERNELWRIGHT_API_KEYS")}
    base = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        _wait_ready(base, proc, log)
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="any", max_retries=0, timeout=120)
        (model,) = client.models.list().data
        messages = [{"role": "user", "content": "Write a CUDA kernel for ReLU."}]
        answer = client.chat.completions.create(model=model.id, messages=messages, temperature=0, max_tokens=8)
        chunks = list(client.chat.completions.create(model=model.id, messages=messages, temperature=0, max_tokens=8,
                                                     stream=True))
        reference = next(t for t in load_seed_tasks() if t.id == "elementwise_elu").reference
        kernel = httpx.post(f"{base}/v1/kernels/generate", timeout=120,
                            json={"reference_code": reference, "n": 2, "max_new_tokens": 8, "repair_attempts": 0})
    finally:
        proc.terminate()
        proc.wait(30)
    choice = answer.choices[0]
    assert model.id == "kernelwright-coder" and answer.usage is not None and answer.usage.completion_tokens > 0
    assert choice.finish_reason in ("stop", "length") and "kernelwright" in choice.model_extra
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == choice.message.content  # greedy: the stream says what the plain answer said
    assert chunks[-1].choices[0].finish_reason == choice.finish_reason
    assert kernel.status_code == 200, kernel.text
    body = kernel.json()
    assert body["model"]["version"] == "1" and body["model"]["alias"] == "candidate"
    assert len(body["candidates"]) == 2 and all(c["compile"]["device"]["status"] for c in body["candidates"])
    text = log.read_text(errors="replace")
    assert "kernelwright-coder version 1 has conv layers" in text and "sequential batching" in text
