"""The openai backend against a real `transformers serve` (continuous batching, CPU, the tiny model).

The engine is started as a subprocess in its own process group on a free loopback port, as
bench/serve_throughput.py starts it, and stopped when the module's tests are done. The test is
skipped, saying why, only when `transformers serve` cannot start here (its serving extras missing,
or the process ending before it answers /health).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from litestar.testing import TestClient

from kernelwright.serving.app import create_app
from kernelwright.serving.config import ServeConfig
from tests.serving.fake_engine import wait_ready

START_TIMEOUT_S = 90.0
CHAT = [{"role": "user", "content": "Write a ReLU kernel."}]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _why_not() -> str | None:
    binary = Path(sys.executable).parent / "transformers"
    if not binary.is_file():
        return f"no `transformers` command next to {Path(sys.executable).name}"
    missing = [m for m in ("fastapi", "uvicorn", "openai") if importlib.util.find_spec(m) is None]
    return f"`transformers serve` needs {', '.join(missing)} (pip install 'transformers[serving]')" if missing else None


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)  # the process group this module started
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@pytest.fixture(scope="module")
def engine(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a running `transformers serve` of the tiny model."""
    if (why := _why_not()) is not None:
        pytest.skip(why)
    port, log_path = _free_port(), tmp_path_factory.mktemp("engine") / "transformers-serve.log"
    env = {k: v for k, v in os.environ.items() if k != "KERNELWRIGHT_API_KEYS"}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
                "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"})
    argv = [str(Path(sys.executable).parent / "transformers"), "serve", str(tiny_model_dir), "--continuous-batching",
            "--cb-num-blocks", "64", "--cb-max-batch-tokens", "256", "--device", "cpu", "--host", "127.0.0.1",
            "--port", str(port), "--log-level", "warning"]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                process_group=0)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.skip(f"`transformers serve` could not start here (exit {proc.returncode}): "
                            f"{log_path.read_text(errors='replace')[-600:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            time.sleep(0.2)
        else:
            pytest.fail(f"`transformers serve` did not answer /health in {START_TIMEOUT_S:.0f} s: "
                        f"{log_path.read_text(errors='replace')[-600:]}")
        yield base
    finally:
        _stop(proc)


@pytest.mark.usefixtures("fake_compile")
def test_kernelwright_over_transformers_serve(engine: str, tiny_model_dir: Path, compile_cache: str) -> None:
    cfg = ServeConfig(backend="openai", backend_url=f"{engine}/v1", backend_startup_s=30, backend_timeout_s=60,
                      compile_host=False, compile_cache_dir=compile_cache)
    with TestClient(app=create_app(cfg), timeout=120) as client:
        ready = wait_ready(client)
        model = str(tiny_model_dir)
        chat = client.post("/v1/chat/completions", json={"model": model, "messages": CHAT, "n": 2, "temperature": 0.7,
                                                         "max_tokens": 8, "seed": 1})
        text = client.post("/v1/completions", json={"model": model, "prompt": "__global__ void relu(", "max_tokens": 6,
                                                    "temperature": 0.7, "top_p": 0.9})
        streamed = client.post("/v1/chat/completions", json={"model": model, "messages": CHAT, "max_tokens": 6,
                                                             "stream": True, "stream_options": {"include_usage": True}})
        kernels = client.post("/v1/kernels/generate", json={"instruction": "a ReLU kernel", "max_new_tokens": 6,
                                                            "n": 2, "repair_attempts": 0})
        listed = client.get("/v1/models").json()["data"]
    assert ready.status_code == 200 and ready.json()["model"] == model, ready.text
    assert [m["id"] for m in listed] == [model]
    assert chat.status_code == 200, chat.text
    body = chat.json()
    assert body["model"] == model and len(body["choices"]) == 2
    assert all(c["finish_reason"] in ("stop", "length") and "kernelwright" in c for c in body["choices"])
    usage = body["usage"]  # the engine's own token counts: 8 new tokens a candidate unless it ended early
    assert usage["prompt_tokens"] > 0 and 0 < usage["completion_tokens"] <= 16
    assert text.status_code == 200 and 0 < text.json()["usage"]["completion_tokens"] <= 6, text.text
    assert streamed.status_code == 200 and streamed.text.rstrip().endswith("data: [DONE]"), streamed.text
    chunks = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")]
    assert chunks[-2]["choices"][0]["finish_reason"] in ("stop", "length")
    assert "kernelwright" in chunks[-2]["choices"][0]
    assert chunks[-1]["choices"] == [] and 0 < chunks[-1]["usage"]["completion_tokens"] <= 6  # the engine's count
    assert kernels.status_code == 200, kernels.text
    answer = kernels.json()
    assert answer["model"] == {"name": model, "version": None, "alias": None, "run_id": None}
    assert len(answer["candidates"]) == 2 and answer["usage"]["completion_tokens"] > 0
