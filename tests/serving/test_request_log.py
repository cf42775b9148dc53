"""Opt-in MLflow logging of served requests: a table per server run, and a dataset at shutdown."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.serving.request_log import EXPERIMENT, TABLE


@pytest.mark.usefixtures("fake_compile")
def test_served_requests_are_logged_as_a_table_and_a_dataset(client_for, good_text, broken_text, tmp_path: Path,
                                                              seed_reference, monkeypatch) -> None:
    from mlflow import MlflowClient

    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    key = "log-key-987"
    with client_for([good_text, broken_text], api_keys=[key], log_requests=True, log_requests_batch=1,
                    workdir=str(tmp_path)) as (client, _):
        auth = {"Authorization": f"Bearer {key}"}
        kernel = client.post("/v1/kernels/generate", json={"reference_code": seed_reference, "repair_attempts": 0},
                             headers={**auth, "X-Request-Id": "req-1"})
        chat = client.post("/v1/chat/completions", json={"model": "models:/kernelwright-coder@champion",
                                                          "messages": [{"role": "user", "content": "ELU"}]},
                           headers=auth)
    assert kernel.status_code == 200 and chat.status_code == 200
    store = MlflowClient(uri)
    (run,) = store.search_runs([store.get_experiment_by_name(EXPERIMENT).experiment_id])
    table = store.load_table(run.info.experiment_id, TABLE, run_ids=[run.info.run_id])
    assert list(table["route"]) == ["kernels/generate", "/v1/chat/completions"]
    assert list(table["compile_ok"]) == [True, False] and table["request_id"][0] == "req-1"
    assert "class ModelNew" in table["code"][0] and seed_reference.strip()[:40] in table["prompt"][0]
    assert key not in table.to_json()
    assert [d.dataset.name for d in run.inputs.dataset_inputs] == ["served-requests"]


def test_nothing_is_logged_by_default(client_for, good_text) -> None:
    with client_for([good_text]) as (client, _):
        assert client.app.state.request_log is None
