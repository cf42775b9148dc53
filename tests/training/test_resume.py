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
    train = _cli("train", *common, "--max-steps", "16", "--save-steps", "4", "--logging-steps", "1",
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
    assert max(steps) == 16
    assert str(last_complete_checkpoint(tmp_path / "train")).endswith("checkpoint-16")
    assert (tmp_path / "train" / "final" / "config.json").is_file()
    card = (tmp_path / "train" / "README.md").read_text()  # kernelwright's card, not TRL's hub draft
    assert f"`{first_id}`" in card and "last step saved when this card was written: 16" in card
    assert "huggingface.co" not in card


def test_partial_checkpoints_are_skipped(tmp_path: Path) -> None:
    for n, complete in ((4, True), (8, True), (12, False)):
        d = tmp_path / f"checkpoint-{n}"
        d.mkdir()
        if complete:
            (d / "trainer_state.json").write_text("{}")
    assert last_complete_checkpoint(tmp_path) == str(tmp_path / "checkpoint-8")
    assert last_complete_checkpoint(tmp_path / "missing") is None


def test_changed_since_begun_names_what_differs(tmp_path: Path) -> None:
    from kernelwright.training.resume import SETTINGS_FILE, changed_since_begun, record_begun_with

    begun = {"kw.max_steps": "40", "kw.data_sha256": "aa"}
    record_begun_with(tmp_path, begun)
    assert changed_since_begun(tmp_path, {"kw.max_steps": "80", "kw.data_sha256": "bb"}) == []  # no checkpoint yet
    (tmp_path / "checkpoint-4").mkdir()
    (tmp_path / "checkpoint-4" / "trainer_state.json").write_text("{}")
    assert changed_since_begun(tmp_path, dict(begun)) == []
    assert changed_since_begun(tmp_path, {"kw.max_steps": "40", "kw.data_sha256": "bb"}) == ["kw.data_sha256: aa -> bb"]
    assert changed_since_begun(tmp_path, {"kw.max_steps": "40"}) == ["kw.data_sha256: aa -> None"]
    (tmp_path / SETTINGS_FILE).write_text("[1, 2")  # a checkpoint of a run that recorded nothing readable
    assert changed_since_begun(tmp_path, {"kw.max_steps": "80"}) == []


@pytest.mark.slow
def test_a_rerun_on_other_data_does_not_resume_the_old_run(tmp_path: Path, tiny_model_dir: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The pipeline trains into <workdir>/train every time: when curation wrote other data since, a
    rerun must not resume (and register) the old run's last checkpoint as if it were trained on it.
    The commands run in this process (kill-and-resume above needs its own)."""
    from kernelwright.cli import main

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    common = ["--workdir", str(tmp_path), "--base-model", str(tiny_model_dir)]
    assert main(["curate", *common]) == 0
    train = ["train", *common, "--max-steps", "2", "--save-steps", "1", "--per-device-train-batch-size", "1",
             "--max-length", "1024", "--no-register"]
    assert main(train) == 0
    capsys.readouterr()
    assert main(train) == 0, capsys.readouterr().err  # the same data and settings: resumes (nothing left to do)
    assert main(["curate", *common, "--max-length", "1500"]) == 0
    capsys.readouterr()
    assert main(train) == 2
    err = capsys.readouterr().err
    assert "kw.data_sha256" in err and "other settings" in err
