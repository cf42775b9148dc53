"""The card a training stage leaves in its output folder: what made it, its MLflow run, how to use it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import mlflow

from kernelwright.model_card import CARD_FILE, model_card, write_model_card


def _trainer(folder: Path, main: bool = True) -> SimpleNamespace:
    return SimpleNamespace(is_world_process_zero=lambda: main, args=SimpleNamespace(output_dir=str(folder)),
                           state=SimpleNamespace(global_step=12))


def test_the_card_names_the_command_the_run_and_how_to_use_the_folder() -> None:
    text = model_card("train", "abc123", 40, "/w/train")
    assert text.startswith("# kernelwright train: train\n")
    assert "`kernelwright train`" in text and "written: 40" in text and "`abc123`" in text
    assert "kernelwright evaluate --model /w/train/final" in text
    assert "without an MLflow run" in model_card("rl", None, 3, "/w/rl")


def test_a_trainer_writes_the_card_with_its_active_run(tmp_path: Path) -> None:
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")  # put back after the test (conftest)
    with mlflow.start_run() as run:
        write_model_card(_trainer(tmp_path / "out"), "rl")
    text = (tmp_path / "out" / CARD_FILE).read_text()
    assert f"`{run.info.run_id}`" in text and "written: 12" in text
    write_model_card(_trainer(tmp_path / "other", main=False), "rl")  # only the main process writes
    assert not (tmp_path / "other" / CARD_FILE).exists()
