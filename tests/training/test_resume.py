"""Kill `kernelwright train` mid-run; the same command resumes from the checkpoint into the same MLflow run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from kernelwright.checkpoints import last_complete_checkpoint
from kernelwright.tracking import EXPERIMENT


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "kernelwright.cli", *args]


@pytest.mark.slow
def test_kill_and_resume_continues_the_same_run(tmp_path: Path, tiny_model_dir: Path) -> None:
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    common = ["--workdir", str(tmp_path), "--base-model", str(tiny_model_dir)]
    subprocess.run(_cli("curate", *common), check=True, env=env, capture_output=True)
    train = _cli("train", *common, "--max-steps", "40", "--save-steps", "4", "--logging-steps", "1",
                 "--per-device-train-batch-size", "1", "--max-length", "2048")
    proc = subprocess.Popen(train, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not list((tmp_path / "train").glob("checkpoint-*/trainer_state.json")) and time.time() < deadline \
            and proc.poll() is None:
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert list((tmp_path / "train").glob("checkpoint-*/trainer_state.json"))
    assert not (tmp_path / "train" / "final").exists(), "the run finished before it could be killed"
    first_id = (tmp_path / "train" / "mlflow_run_id.txt").read_text().strip()
    subprocess.run(train, check=True, env=env, capture_output=True)
    client = MlflowClient(env["MLFLOW_TRACKING_URI"])
    exp = client.get_experiment_by_name(EXPERIMENT)
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], filter_string="tags.`kernelwright.stage` = 'train'")
    assert [r.info.run_id for r in runs] == [first_id]
    steps = [m.step for m in client.get_metric_history(first_id, "loss")]
    assert max(steps) == 40
    assert str(last_complete_checkpoint(tmp_path / "train")).endswith("checkpoint-40")
    assert (tmp_path / "train" / "final" / "config.json").is_file()


def test_partial_checkpoints_are_skipped(tmp_path: Path) -> None:
    for n, complete in ((4, True), (8, True), (12, False)):
        d = tmp_path / f"checkpoint-{n}"
        d.mkdir()
        if complete:
            (d / "trainer_state.json").write_text("{}")
    assert last_complete_checkpoint(tmp_path) == str(tmp_path / "checkpoint-8")
    assert last_complete_checkpoint(tmp_path / "missing") is None
