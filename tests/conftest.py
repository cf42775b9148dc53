from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "false")


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def pch_dir(tmp_path_factory) -> Path:
    """One folder for torch's precompiled header of the host compile checks (built once, ~15-45 s), shared by
    every test module that checks host code; $KW_TEST_PCH_DIR keeps it across runs."""
    return Path(os.environ["KW_TEST_PCH_DIR"]) if os.environ.get("KW_TEST_PCH_DIR") else tmp_path_factory.mktemp("pch")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny base model built once per test session from the seed corpus."""
    from kernelwright.models import TinyModelSpec, build_tiny_model
    from kernelwright.seed import load_seed_tasks

    texts = [t.reference + "\n" + t.solution for t in load_seed_tasks()]
    spec = TinyModelSpec(vocab_size=1024, hidden_size=64, intermediate_size=128, num_hidden_layers=1)
    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny", texts, spec)


@pytest.fixture(autouse=True)
def _mlflow_globals_restored(monkeypatch):
    """A stage run selects an experiment (exported to the environment as MLFLOW_EXPERIMENT_ID) and a
    tracking URI for the process: put both back after every test, so no test inherits another's store."""
    import mlflow
    import mlflow.tracking.fluent as fluent

    monkeypatch.setattr(fluent, "_active_experiment_id", None)  # not one a session fixture selected
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", "")  # set_experiment exports it: removed again after the test
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID")
    yield
    mlflow.set_tracking_uri(None)
