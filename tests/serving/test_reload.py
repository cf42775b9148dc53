"""Model reload: the alias moves, the new version loads in the background and replaces the old one."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from litestar.testing import TestClient

from kernelwright.serving.app import create_app
from kernelwright.serving.backend import ScriptedBackend
from kernelwright.serving.config import ServeConfig
from kernelwright.serving.schemas import ModelInfo
from tests.serving.backends import GatedBackend

BODY = {"instruction": "Write a ReLU kernel.", "compile_check": False}
NAME = "kernelwright-coder"


def _wait_version(client: TestClient, version: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        r = client.get("/readyz")
        if r.status_code == 200 and r.json()["version"] == version:
            return
        time.sleep(0.02)
    raise AssertionError(f"version {version} was not served within {seconds} s")


def _wait_answer(seen: list[tuple[int, str, str]], version: str, seconds: float = 60) -> None:
    """Until some answer under load came from `version` (the loaders append to `seen`)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(body == version for _, body, _ in list(seen)):
            return
        time.sleep(0.02)
    raise AssertionError(f"no answer from version {version} within {seconds} s: {seen[-5:]}")


def test_a_request_in_flight_finishes_on_the_old_version() -> None:
    old = GatedBackend(["old answer"])
    polls: list[str | None] = []

    def reloader(current: ModelInfo):  # type: ignore[no-untyped-def]
        polls.append(current.version)
        return None if current.version == "2" else (ScriptedBackend(["new answer"]), ModelInfo(NAME, "2"))

    cfg = ServeConfig(reload_interval_s=0.05)
    app = create_app(cfg, old, model_info=ModelInfo(NAME, "1", "champion"), reloader=reloader)
    with TestClient(app=app) as client:
        answers = []
        first = threading.Thread(target=lambda: answers.append(client.post("/v1/kernels/generate", json=BODY)))
        first.start()
        assert old.entered.wait(10)
        _wait_version(client, "2")
        fresh = client.post("/v1/kernels/generate", json=BODY)
        old.gate.set()
        first.join(10)
    (late,) = answers
    assert late.status_code == 200 and late.json()["model"]["version"] == "1"
    assert late.json()["candidates"][0]["code"] == "old answer" and late.headers["x-kernelwright-model-version"] == "1"
    assert fresh.json()["model"]["version"] == "2" and fresh.json()["candidates"][0]["code"] == "new answer"
    assert fresh.headers["x-kernelwright-model-version"] == "2" and set(polls) <= {"1", "2"}


def test_a_failed_reload_keeps_serving(good_text: str) -> None:
    def reloader(current: ModelInfo):  # type: ignore[no-untyped-def]
        raise RuntimeError("registry down")

    app = create_app(ServeConfig(reload_interval_s=0.02), ScriptedBackend([good_text]),
                     model_info=ModelInfo(NAME, "1"), reloader=reloader)
    with TestClient(app=app) as client:
        time.sleep(0.2)
        r = client.post("/v1/kernels/generate", json=BODY)
    assert r.status_code == 200 and r.json()["model"]["version"] == "1"


@pytest.fixture
def registry(tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A local MLflow file store holding two registered versions of the tiny model, @champion on 1."""
    import mlflow
    import mlflow.transformers
    from mlflow import MlflowClient

    from kernelwright.models import load_base_model, load_tokenizer

    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
    parts = {"model": load_base_model(tiny_model_dir), "tokenizer": load_tokenizer(tiny_model_dir)}
    with mlflow.start_run():
        info = mlflow.transformers.log_model(transformers_model=parts, name="model", task="text-generation",
                                             registered_model_name=NAME, pip_requirements=["torch"])
    mlflow.register_model(info.model_uri, NAME)
    MlflowClient().set_registered_model_alias(NAME, "champion", "1")
    yield tmp_path
    mlflow.set_tracking_uri(None)


def test_the_alias_moved_under_load_swaps_versions_without_a_failed_request(registry: Path) -> None:
    from mlflow import MlflowClient

    cfg = ServeConfig(model=f"models:/{NAME}@champion", workdir=str(registry), reload_interval_s=0.1,
                      default_max_new_tokens=4, compile_host=False)
    seen: list[tuple[int, str, str]] = []
    stop = threading.Event()
    with TestClient(app=create_app(cfg)) as client:
        _wait_version(client, "1", 60)
        old_engine = client.app.state.served.backend.manager  # the backend itself is not held here

        def load() -> None:
            while not stop.is_set():
                r = client.post("/v1/kernels/generate", json=BODY)
                seen.append((r.status_code, r.json().get("model", {}).get("version"),
                             r.headers["x-kernelwright-model-version"]))

        workers = [threading.Thread(target=load) for _ in range(3)]
        for w in workers:
            w.start()
        _wait_answer(seen, "1")
        MlflowClient().set_registered_model_alias(NAME, "champion", "2")
        _wait_version(client, "2")
        _wait_answer(seen, "2")  # load keeps coming until the new version has answered some of it
        stop.set()
        for w in workers:
            w.join(30)
        gc.collect()
        deadline = time.monotonic() + 10
        while old_engine.is_running() and time.monotonic() < deadline:  # let go of, the old version's engine stops
            time.sleep(0.02)
        assert not old_engine.is_running() and client.app.state.served.backend.manager.is_running()
    assert seen and all(status == 200 for status, _, _ in seen), seen
    assert all(body == header for _, body, header in seen)  # each answer names the version that made it
    assert {body for _, body, _ in seen} == {"1", "2"} and seen[-1][1] == "2"
