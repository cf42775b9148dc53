"""A run's settings as its command's `--config` file (`config/<command>.yaml`): written once, read back whole."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import mlflow
import pytest
import yaml
from mlflow.tracking import MlflowClient

from kernelwright.base_model.config import PretrainConfig
from kernelwright.config import config_yaml, parse_config
from kernelwright.curation.config import CurateConfig
from kernelwright.evaluation.config import EvaluateConfig
from kernelwright.job_config import PipelineConfig
from kernelwright.retrain.config import RetrainConfig
from kernelwright.rl.config import RLConfig
from kernelwright.synthesis.config import SynthesizeConfig
from kernelwright.tracking import config_artifact, log_config
from kernelwright.training.config import TrainConfig

COMMANDS = [(PipelineConfig, "pipeline"), (CurateConfig, "curate"), (SynthesizeConfig, "synthesize"),
            (TrainConfig, "train"), (RLConfig, "rl"), (EvaluateConfig, "evaluate"),
            (PretrainConfig, "base-model pretrain"), (RetrainConfig, "retrain")]


def _read_back(cls: type, text: str, tmp_path: Path) -> object:
    f = tmp_path / "run.yaml"
    f.write_text(text, encoding="utf-8")
    return parse_config(cls, ["--config", str(f)], "t")


@pytest.mark.parametrize(("cls", "command"), COMMANDS, ids=[c for _, c in COMMANDS])
def test_every_commands_defaults_come_back_whole(cls: type, command: str, tmp_path: Path) -> None:
    cfg: object = parse_config(cls, [], "t")
    text = config_yaml(cfg, command)
    assert text.startswith(f"# kernelwright {command} --config")
    assert _read_back(cls, text, tmp_path) == cfg


def test_settings_away_from_the_defaults_come_back_whole(tmp_path: Path) -> None:
    """Lists, paths, floats, bools and None, as a command given them would hold them."""
    train = parse_config(TrainConfig, ["--max-steps", "17", "--learning-rate", "3.5e-4", "--weighting", "cuset",
                                       "--lora", "--data", str(tmp_path / "my data"), "--seed", "4"], "t")
    assert _read_back(TrainConfig, config_yaml(train, "train"), tmp_path) == train
    rl = parse_config(RLConfig, ["--infill-kinds", "index_guard", "reduction_loop", "--items-per-phase", "8",
                                 "--max-minutes", "2.5"], "t")
    assert rl.infill_kinds == ["index_guard", "reduction_loop"]
    assert _read_back(RLConfig, config_yaml(rl, "rl"), tmp_path) == rl
    synth = parse_config(SynthesizeConfig, ["--families", "elementwise", "matmul_epilogue", "--tasks", "40"], "t")
    assert _read_back(SynthesizeConfig, config_yaml(synth, "synthesize"), tmp_path) == synth


def test_a_uris_password_is_not_written(tmp_path: Path) -> None:
    cfg = dataclasses.replace(parse_config(EvaluateConfig, [], "t"),
                              tracking_uri="postgresql://kw:s3cret@db.example:5432/mlflow")
    text = config_yaml(cfg, "evaluate")
    assert "s3cret" not in text
    assert yaml.safe_load(text)["tracking_uri"] == "postgresql://kw:***@db.example:5432/mlflow"


def test_the_run_keeps_the_file_it_started_with(tmp_path: Path) -> None:
    """On the active run only; a resumed run (the same run started again) keeps its first settings, as its
    params do, and a command that logs twice writes once."""
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    log_config(TrainConfig(max_steps=5), "train")  # no active run: nothing, no error
    with mlflow.start_run() as run:
        log_config(TrainConfig(max_steps=5), "train")
    with mlflow.start_run(run_id=run.info.run_id):
        log_config(TrainConfig(max_steps=9), "train")
    client = MlflowClient()
    assert [a.path for a in client.list_artifacts(run.info.run_id, "config")] == ["config/train.yaml"]
    local = client.download_artifacts(run.info.run_id, config_artifact("train"), str(tmp_path / "dl"))
    again = parse_config(TrainConfig, ["--config", local], "t")
    assert again.max_steps == 5 and again == TrainConfig(max_steps=5)
    assert config_artifact("base-model pretrain") == "config/base-model-pretrain.yaml"
