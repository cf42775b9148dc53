"""MLflow on PostgreSQL: the schema upgraded as `kernelwright mlflow-server` does it, then a retrain whose runs
and registry live there and whose lock is the server's advisory lock, then a rollback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from kernelwright.evaluation.registry import PREVIOUS_CHAMPION, alias_version, promote, rollback
from kernelwright.mlflow_server import MlflowServerConfig, mlflow_server_commands
from kernelwright.retrain.job import run_retrain
from kernelwright.tracking import REGISTERED_MODEL
from kernelwright.workdir import tracking_env
from tests.retrain._doubles import on_a_fake_gpu, tiny_retrain
from tests.retrain._pg import scratch_database


@pytest.mark.slow
def test_a_retrain_tracked_on_postgresql_promotes_under_its_advisory_lock(
        tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    gpu = on_a_fake_gpu(monkeypatch)
    caplog.set_level("INFO", logger="kernelwright.retrain.job")
    with scratch_database() as uri:
        upgrade, _ = mlflow_server_commands(MlflowServerConfig(workdir=str(tmp_path / "srv"), backend_store_uri=uri))
        subprocess.run(upgrade, check=True, capture_output=True)
        cfg = tiny_retrain(tmp_path, tiny_model_dir, tracking_uri=uri)
        result = run_retrain(cfg, verifier=gpu)
        assert (result.decision, result.champion_version) == ("promoted", "1")
        assert "retrain holds the PostgreSQL advisory lock on postgresql://" in caplog.text
        assert not (tmp_path / "kw" / "mlflow.db").exists() and not (tmp_path / "kw" / "retrain.lock").exists()
        client = MlflowClient(uri)
        assert client.get_run(result.run_id).data.tags["kw.retrain.decision"] == "promoted"
        assert str(client.get_model_version_by_alias(REGISTERED_MODEL, "champion").version) == "1"
        assert run_retrain(cfg, verifier=gpu).decision == "skipped"
        with tracking_env(uri):
            mlflow.set_tracking_uri(uri)
            client.create_model_version(REGISTERED_MODEL, str(tmp_path))
            assert promote(REGISTERED_MODEL, "2", "by hand") == "1"
            assert rollback(REGISTERED_MODEL) == ("1", "2")
            assert alias_version(REGISTERED_MODEL, PREVIOUS_CHAMPION) is None
