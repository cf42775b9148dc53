"""Real models loaded through the lifespan (a tiny Qwen2 folder; the pipeline's kind, LFM2, from the registry);
alias fallback; the CLI's checks before serving."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from litestar.testing import TestClient

from kernelwright.cli import main
from kernelwright.config import build_parser
from kernelwright.errors import UsageError
from kernelwright.models import ModelRef
from kernelwright.serve import check_serve_config
from kernelwright.serving import loading
from kernelwright.serving.app import create_app
from kernelwright.serving.config import ServeConfig
from tests.serving.pipeline_model import micro_base, register_candidate


def _ready(client: TestClient, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        r = client.get("/readyz")
        if r.status_code == 200:
            return
        assert r.json()["status"] == "loading", r.text
        time.sleep(0.05)
    raise AssertionError("the model did not load")


@pytest.mark.parametrize(("batching", "temperature"), [("continuous", 0.0), ("sequential", 0.9)])
def test_a_tiny_model_loads_in_the_lifespan_and_generates(tiny_model_dir: Path, batching: str,
                                                          temperature: float) -> None:
    cfg = ServeConfig(model=str(tiny_model_dir), default_max_new_tokens=8, compile_host=False, batching=batching)
    body = {"instruction": "Write a ReLU kernel.", "n": 2 if temperature else 1, "temperature": temperature,
            "seed": 5, "compile_check": False}  # greedy candidates would repeat each other: one
    with TestClient(app=create_app(cfg)) as client:
        _ready(client)
        first = client.post("/v1/kernels/generate", json=body).json()
        again = client.post("/v1/kernels/generate", json=body).json()
        chat = client.post("/v1/chat/completions", json={"model": cfg.model, "max_tokens": 6, "temperature": 0,
                                                          "messages": [{"role": "user", "content": "hi"}],
                                                          "stream": True})
    assert first["model"]["name"] == tiny_model_dir.name and first["model"]["version"] is None
    assert 0 < first["usage"]["completion_tokens"] <= 8 * body["n"] and first["usage"]["prompt_tokens"] > 0
    assert [c["code"] for c in first["candidates"]] == [c["code"] for c in again["candidates"]]  # same seed
    assert chat.status_code == 200 and chat.text.rstrip().endswith("data: [DONE]")


@pytest.mark.parametrize("batching", ["continuous", "sequential"])
def test_a_prompt_over_the_context_is_a_400_not_a_500(tiny_model_dir: Path, batching: str) -> None:
    cfg = ServeConfig(model=str(tiny_model_dir), compile_host=False, batching=batching)
    long = {"instruction": "kernel " * 3000, "max_new_tokens": 4096, "compile_check": False}
    chat = {"model": cfg.model, "messages": [{"role": "user", "content": "kernel " * 3000}], "max_tokens": 4096,
            "stream": True}
    with TestClient(app=create_app(cfg)) as client:
        _ready(client)
        plain = client.post("/v1/kernels/generate", json=long)
        streamed = client.post("/v1/chat/completions", json=chat)
    assert plain.status_code == 400 and "context" in plain.json()["detail"]
    assert plain.json()["error"]["param"] == "max_new_tokens"
    assert '"error"' in streamed.text and "context" in streamed.text


@contextmanager
def _records(logger: logging.Logger) -> Iterator[list[logging.LogRecord]]:
    """What `logger` logs meanwhile (on the logger itself: the app's logging set-up replaces the root's handlers)."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


@pytest.fixture(scope="module")
def registered_micro(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The pipeline's kind of model (LFM2 micro base) registered as kernelwright-coder @candidate: the store's URI."""
    folder = tmp_path_factory.mktemp("registry")
    return register_candidate(micro_base(tmp_path_factory), folder)


@pytest.mark.parametrize("batching", [None, "continuous"])
def test_the_pipelines_kind_of_model_is_served_from_the_registry(registered_micro: str, batching: str | None,
                                                                 compile_cache: str) -> None:
    """A model with short-convolution layers becomes ready on the default config, served sequentially with a notice
    (an explicit `continuous` too), and answers the kernel route, a chat and a stream."""
    extra = {"batching": batching} if batching else {}
    cfg = ServeConfig(model="models:/kernelwright-coder@candidate", tracking_uri=registered_micro,
                      default_max_new_tokens=8, compile_host=False, compile_cache_dir=compile_cache,
                      reload_interval_s=0, **extra)
    chat = {"model": "kernelwright-coder", "messages": [{"role": "user", "content": "relu"}], "max_tokens": 6,
            "temperature": 0}
    with _records(loading.log) as records, TestClient(app=create_app(cfg)) as client:
        _ready(client)
        kernel = client.post("/v1/kernels/generate", json={"instruction": "Write a ReLU kernel.", "n": 2})
        plain = client.post("/v1/chat/completions", json=chat)
        streamed = client.post("/v1/chat/completions", json={**chat, "stream": True})
        seeded = client.post("/v1/chat/completions", json={**chat, "temperature": 0.8, "seed": 3})
    assert kernel.status_code == 200, kernel.text
    model = kernel.json()["model"]
    assert (model["name"], model["version"], model["alias"]) == ("kernelwright-coder", "1", "candidate")
    assert all(c["compile"] is not None for c in kernel.json()["candidates"])
    assert plain.status_code == 200 and plain.json()["usage"]["completion_tokens"] > 0, plain.text
    assert streamed.status_code == 200 and streamed.text.rstrip().endswith("data: [DONE]")
    assert seeded.status_code == 200  # a seed with temperature > 0 is honoured, not refused
    (notice,) = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert "kernelwright-coder version 1 has conv layers" in notice and "sequential" in notice
    assert ("asked for: continuous" in notice) == (batching == "continuous")


def test_batching_for_keeps_continuous_for_attention_only_models(tiny_model_dir: Path) -> None:
    from kernelwright.models import load_base_model

    model = load_base_model(tiny_model_dir)
    with _records(loading.log) as records:
        for batching in ("auto", "continuous"):
            assert loading.batching_for(model, ServeConfig(batching=batching), "tiny") == "continuous"
        assert loading.batching_for(model, ServeConfig(batching="sequential"), "tiny") == "sequential"
    assert not records


def test_champion_falls_back_to_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    def resolve(uri: str) -> ModelRef:
        if uri.endswith("@candidate"):
            return ModelRef("models:/kernelwright-coder/3", "kernelwright-coder", "3")
        raise UsageError("no alias")

    monkeypatch.setattr(loading, "resolve_ref", resolve)
    monkeypatch.setattr(loading, "_run_id", lambda ref: "run-1")
    ref, info = loading.resolve_model("models:/kernelwright-coder@champion")
    assert ref.version == "3" and info.alias == "candidate" and info.run_id == "run-1"


def test_neither_alias_is_a_clear_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def resolve(uri: str) -> ModelRef:
        raise UsageError("no alias")

    monkeypatch.setattr(loading, "resolve_ref", resolve)
    with pytest.raises(UsageError, match="neither a @champion nor a @candidate"):
        loading.resolve_model("models:/kernelwright-coder@champion")
    with pytest.raises(UsageError, match="no alias"):
        loading.resolve_model("models:/kernelwright-coder@staging")


def test_serve_refuses_what_it_cannot_serve_with_exit_2(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert main(["serve", "--workdir", str(tmp_path)]) == 2
    assert "no MLflow store" in capsys.readouterr().err
    assert not (tmp_path / "mlflow.db").exists()
    assert main(["serve", "--model", str(tmp_path / "nothing")]) == 2
    assert main(["serve", "--backend", f"scripted:{tmp_path / 'none.json'}"]) == 2


def test_preflight_names_the_scripted_backend(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text('["a", "b"]')
    described = check_serve_config(ServeConfig(backend=f"scripted:{tmp_path / 't.json'}"))
    assert described.startswith("scripted backend (2 texts")


def test_help_documents_the_scripted_backend_and_the_keys() -> None:
    text = " ".join(build_parser(ServeConfig, "kernelwright serve").format_help().split())
    assert "scripted:FILE.json" in text and "KERNELWRIGHT_API_KEYS" in text and "0: no limit" in text


def test_a_registry_model_is_placed_like_a_folder_model(registered_micro: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow's loader leaves the model on the CPU in its saved dtype; `load_model` moves it where a folder model goes
    (on a GPU host: the GPU in bf16), so serving and evaluating a registered version never run on the CPU."""
    import mlflow
    import torch

    from kernelwright import models

    monkeypatch.setattr(models, "placement", lambda device=None: ("cpu", torch.float64))
    before = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(registered_micro)
    try:
        model, _ = models.load_model(models.resolve_ref("models:/kernelwright-coder@candidate"))
    finally:
        mlflow.set_tracking_uri(before)
    assert {p.dtype for p in model.parameters()} == {torch.float64}
    assert {p.device.type for p in model.parameters()} == {"cpu"}
