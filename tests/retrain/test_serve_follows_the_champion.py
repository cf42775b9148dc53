"""A running `kernelwright serve` on models:/NAME@champion answers with the version a retrain promotes, without a
restart: the retrain's gate moves the alias, the server's poll (serving/reload.py) notices and swaps the model in.
The retrains run on a CPU with a generator and a GPU-verifier double (tests/retrain/_doubles.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from litestar.testing import TestClient

from kernelwright.retrain.job import run_retrain
from kernelwright.serving.app import create_app
from kernelwright.serving.config import ServeConfig
from kernelwright.tracking import REGISTERED_MODEL
from tests.retrain._doubles import on_a_fake_gpu, tiny_retrain

BODY = {"instruction": "Write a ReLU kernel.", "compile_check": False}


def _served_version(client: TestClient) -> str | None:
    r = client.get("/readyz")
    return r.json().get("version") if r.status_code == 200 else None


def _wait_for_version(client: TestClient, version: str, seconds: float) -> None:
    """Bounded wait: the poll runs every 0.2 s; `seconds` only caps a failure."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _served_version(client) == version:
            return
        time.sleep(0.05)
    raise AssertionError(f"still serving version {_served_version(client)}, not {version}, after {seconds} s")


@pytest.mark.slow  # two whole (tiny) retrains: ~25 s on two cores
def test_a_running_server_serves_the_champion_a_retrain_promotes(
        tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    gpu = on_a_fake_gpu(monkeypatch)
    gpu.speeds["1"] = {"affine": 1.5, "relu_nonneg": 0.8}  # fast_1 0.5
    first = run_retrain(tiny_retrain(tmp_path, tiny_model_dir), verifier=gpu)
    assert (first.decision, first.champion_version) == ("promoted", "1")

    cfg = ServeConfig(model=f"models:/{REGISTERED_MODEL}@champion", workdir=str(tmp_path / "kw"),
                      reload_interval_s=0.2, default_max_new_tokens=2, compile_host=False, batching="sequential")
    with TestClient(app=create_app(cfg)) as client:
        _wait_for_version(client, "1", 60)
        before = client.post("/v1/kernels/generate", json=BODY)
        # another training setting: a new watermark, so a new candidate (the curated data is reused)
        gpu.speeds["2"] = {"affine": 2.0, "relu_nonneg": 2.0}  # fast_1 1.0: better than the champion's 0.5
        second = run_retrain(tiny_retrain(tmp_path, tiny_model_dir, max_steps=3), verifier=gpu)
        assert (second.decision, second.candidate_version, second.champion_version) == ("promoted", "2", "2")
        _wait_for_version(client, "2", 60)
        after = client.post("/v1/kernels/generate", json=BODY)
    assert before.status_code == 200 and before.json()["model"]["version"] == "1"
    assert after.status_code == 200 and after.json()["model"]["version"] == "2"
    assert after.json()["model"]["alias"] == "champion" and after.headers["x-kernelwright-model-version"] == "2"
