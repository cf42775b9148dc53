"""A retrain killed (SIGKILL) during training resumes, on the next run, into the same MLflow runs; on a
machine without a GPU that run is `not_gated` and moves no alias."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from kernelwright.checkpoints import RUN_ID_FILE
from kernelwright.evaluation import stage
from kernelwright.evaluation.registry import CHAMPION, alias_version
from kernelwright.retrain.job import run_retrain
from kernelwright.tracking import EXPERIMENT, REGISTERED_MODEL
from tests.retrain._doubles import honest_generations, tiny_retrain

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.slow
def test_a_retrain_killed_during_training_resumes_into_the_same_runs_and_without_a_gpu_is_not_gated(
        tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cfg = tiny_retrain(tmp_path, tiny_model_dir, max_steps=4, save_steps=2, keep_checkpoints=0)
    (tmp_path / "cfg.json").write_text(json.dumps(asdict(cfg)))
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"} | {"PYTHONPATH": str(ROOT)}
    killed = subprocess.run([sys.executable, "-m", "tests.retrain._killed_retrain", str(tmp_path / "cfg.json")],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    train_dir = next((tmp_path / "kw" / "retrain").glob("train-*"))
    assert (train_dir / "checkpoint-2" / "trainer_state.json").is_file() and not (train_dir / "final").exists()
    uri = f"sqlite:///{tmp_path / 'kw' / 'mlflow.db'}"
    client = MlflowClient(uri)
    mlflow.set_tracking_uri(uri)  # for alias_version, before the retrain below sets it
    train_run = (train_dir / RUN_ID_FILE).read_text().strip()
    assert client.get_run(train_run).info.status == "RUNNING"  # killed: nobody ended it
    assert alias_version(REGISTERED_MODEL, CHAMPION) is None

    monkeypatch.setattr(stage, "cuda_available", lambda: False)
    monkeypatch.setattr(stage, "generate_into", honest_generations)
    result = run_retrain(cfg)
    assert (result.decision, result.candidate_version, result.champion_version) == ("not_gated", "1", None)
    assert "not GPU-verified" in result.reason and alias_version(REGISTERED_MODEL, "candidate") == "1"
    assert alias_version(REGISTERED_MODEL, CHAMPION) is None
    resumed = client.get_run(train_run)
    assert resumed.info.status == "FINISHED" and resumed.data.tags["kw.resumed_from"].endswith("checkpoint-2")
    assert resumed.data.tags["mlflow.parentRunId"] == result.run_id  # the killed attempt's parent, resumed
    exp = client.get_experiment_by_name(EXPERIMENT)
    assert exp is not None
    parents = client.search_runs([exp.experiment_id], filter_string="tags.`kernelwright.stage` = 'retrain'")
    assert [p.info.run_id for p in parents] == [result.run_id]
    assert client.get_run(result.run_id).data.tags["kw.retrain.resumed"] == "true"
    children = client.search_runs([exp.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{result.run_id}'")
    assert sorted(r.info.run_name for r in children) == ["curate", "evaluate", "train"]
    assert not list(train_dir.glob("checkpoint-*")) and (train_dir / "final").is_dir()  # keep_checkpoints 0
    assert run_retrain(cfg).decision == "skipped"
