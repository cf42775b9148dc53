"""Registering a model built on this machine asks no Hugging Face Hub for its card or licence."""

from __future__ import annotations

import shutil
from pathlib import Path

import huggingface_hub
import mlflow
import pytest
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id
from mlflow.tracking import MlflowClient

from kernelwright.model_card import log_local_model
from kernelwright.models import load_base_model, load_tokenizer
from kernelwright.tracking import setup_tracking


@pytest.fixture
def hub_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every hub lookup MLflow makes, (function, repository name); each fails, as offline."""
    calls: list[tuple[str, str]] = []

    def offline(what: str):  # type: ignore[no-untyped-def]
        def call(name, *args, **kwargs):  # type: ignore[no-untyped-def]
            calls.append((what, str(kwargs.get("repo_id", name))))
            raise OSError("offline")
        return call

    monkeypatch.setattr(huggingface_hub.ModelCard, "load", offline("ModelCard.load"))
    monkeypatch.setattr(huggingface_hub, "list_repo_files", offline("list_repo_files"))
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline("hf_hub_download"))
    return calls


def test_a_model_in_a_relative_folder_is_registered_without_the_hub(
        tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        hub_calls: list[tuple[str, str]]) -> None:
    """`W/base` reads as a hub repository id: MLflow would fetch its card (five retries offline) and list its
    files for a licence. Given kernelwright's card it fetches none, and the name it lists is the folder's absolute
    path, which the hub's own check refuses before any request; the card says what made the model."""
    shutil.copytree(tiny_model_dir, tmp_path / "W" / "base")
    monkeypatch.chdir(tmp_path)
    model = load_base_model(Path("W/base"), device="cpu")
    assert model.name_or_path == "W/base"  # what a stage given a relative folder has
    setup_tracking(tmp_path / "W")
    with mlflow.start_run():
        info = log_local_model({"model": model, "tokenizer": load_tokenizer(Path("W/base"))}, "train",
                               registered_model_name="kw-local", pip_requirements=["kernelwright"])
    assert [what for what, _ in hub_calls] == ["list_repo_files"]  # the licence lookup; no card fetched
    for _, name in hub_calls:
        assert Path(name) == (tmp_path / "W" / "base").resolve()
        with pytest.raises(HFValidationError):
            validate_repo_id(name)
    assert str(info.registered_model_version) == "1"
    assert [v.version for v in MlflowClient().search_model_versions("name='kw-local'")] == [1]
    folder = Path(mlflow.artifacts.download_artifacts(info.model_uri, dst_path=str(tmp_path / "a")))
    assert "made by `kernelwright train`" in (folder / "model_card.md").read_text()
