"""kernelwright's experiments open in MLflow 3's UI as model-training experiments, not GenAI ones: the
`mlflow.experimentKind` tag on every experiment it makes or uses, and the link `mlflow-server` prints."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from kernelwright.mlflow_server import MlflowServerConfig, run_mlflow_server
from kernelwright.tracking import (
    EXPERIMENT,
    EXPERIMENT_KIND_TAG,
    MODEL_TRAINING,
    ensure_experiment,
    experiment_page_url,
    setup_tracking,
    ui_start_page,
)


@pytest.fixture()
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def test_a_new_experiment_is_a_model_training_one(tmp_path: Path, store: str) -> None:
    exp_id = setup_tracking(tmp_path)
    assert MlflowClient(store).get_experiment(exp_id).tags[EXPERIMENT_KIND_TAG] == MODEL_TRAINING


def test_an_experiment_made_before_is_marked_and_a_chosen_kind_is_kept(tmp_path: Path, store: str) -> None:
    client = MlflowClient(store)
    older = client.create_experiment(EXPERIMENT)
    chosen = client.create_experiment("chosen", tags={EXPERIMENT_KIND_TAG: "genai_development"})
    assert setup_tracking(tmp_path) == older
    assert client.get_experiment(older).tags[EXPERIMENT_KIND_TAG] == MODEL_TRAINING
    assert ensure_experiment(client, "chosen") == chosen
    assert client.get_experiment(chosen).tags[EXPERIMENT_KIND_TAG] == "genai_development"


def test_other_experiments_are_made_the_same_way(store: str) -> None:
    client = MlflowClient(store)
    served = ensure_experiment(client, "kernelwright-served")
    assert client.get_experiment(served).tags[EXPERIMENT_KIND_TAG] == MODEL_TRAINING
    assert ensure_experiment(client, "kernelwright-served") == served


def test_the_link_opens_the_experiment_as_model_training(tmp_path: Path, store: str) -> None:
    assert experiment_page_url("http://h:5000/", "3") == "http://h:5000/#/experiments/3/runs?workflowType=machine_learning"
    assert experiment_page_url("http://h:5000", None) == "http://h:5000/#/experiments?workflowType=machine_learning"
    assert ui_start_page("http://h:5000", store) == "http://h:5000/#/experiments?workflowType=machine_learning"
    exp_id = setup_tracking(tmp_path)
    assert ui_start_page("http://h:5000", store) == experiment_page_url("http://h:5000", exp_id)
    assert ui_start_page("http://h:5000", "nosuchscheme://x") == experiment_page_url("http://h:5000", None)


class _Execd(Exception):
    pass


def test_mlflow_server_prints_the_experiment_page(tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    exp_id = setup_tracking(tmp_path)

    def execv(path: str, argv: list[str]) -> None:
        raise _Execd(argv)

    monkeypatch.setattr(os, "execv", execv)
    said: list[str] = []
    with pytest.raises(_Execd):
        run_mlflow_server(MlflowServerConfig(workdir=str(tmp_path), port=5123), said.append)
    assert said and said[0].startswith(f"MLflow UI on http://127.0.0.1:5123/#/experiments/{exp_id}/runs"
                                       "?workflowType=machine_learning ")


def test_the_served_requests_experiment_is_a_model_training_one(tmp_path: Path, store: str) -> None:
    from kernelwright.serving.config import ServeConfig
    from kernelwright.serving.request_log import EXPERIMENT as SERVED
    from kernelwright.serving.request_log import RequestLog

    RequestLog(ServeConfig(workdir=str(tmp_path), tracking_uri=store, log_requests=True))._client()
    served = MlflowClient(store).get_experiment_by_name(SERVED)
    assert served is not None and served.tags[EXPERIMENT_KIND_TAG] == MODEL_TRAINING
