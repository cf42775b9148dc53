"""End to end: the pipeline's MLflow runs, registry version and alias (on a CPU, and on a CUDA host)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from kernelwright.base_model.config import SIZES
from kernelwright.base_model.pretrain import META_FILE
from kernelwright.config import parse_config
from kernelwright.curation.config import CurateConfig
from kernelwright.evaluation.config import EvaluateConfig
from kernelwright.pipeline import PipelineConfig, base_heldout_figure, run_pipeline
from kernelwright.synthesis.config import SynthesizeConfig
from kernelwright.tracking import EXPERIMENT, REGISTERED_MODEL, config_artifact
from kernelwright.training.config import TrainConfig


def _check_store(uri: str, run_id: str, download: Path) -> None:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    assert exp is not None
    children = client.search_runs([exp.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{run_id}'")
    assert sorted(r.info.run_name for r in children) == ["curate", "evaluate", "train"]
    by_name = {r.info.run_name: r for r in children}
    assert by_name["train"].data.metrics["train_loss"] > 0
    assert by_name["train"].data.params["cuset.tau_high"] == "0.9"
    evaluated = by_name["evaluate"].data
    assert "evaluate.compile_rate" in evaluated.metrics
    assert evaluated.metrics["evaluate.heldout_bits_per_char"] > 0  # what training did, where nothing compiles
    assert sum(evaluated.metrics[f"evaluate.finished_{r}"] for r in ("stop", "length", "loop")) == \
        evaluated.metrics["evaluate.samples"]  # why each completion ended
    assert evaluated.metrics["evaluate.new_tokens_mean"] > 0  # and how much of the token budget it took
    gpu = torch.cuda.is_available()
    assert evaluated.tags["gpu_verified"] == str(gpu).lower()
    if gpu:  # recorded even when no generated kernel is correct: rates 0, never absent
        assert {"evaluate.fast_0", "evaluate.fast_1", "evaluate.fast_p.0.5"} <= evaluated.metrics.keys()
        assert "evaluate.samples" in evaluated.metrics
    assert by_name["curate"].data.metrics["curate.samples"] > 0
    commands = {"pipeline": PipelineConfig, "curate": CurateConfig, "train": TrainConfig, "evaluate": EvaluateConfig}
    for one, command in [(run_id, "pipeline"), *((r.info.run_id, r.info.run_name) for r in children)]:
        assert [a.path for a in client.list_artifacts(one, "config")] == [config_artifact(command)]
        settings = client.download_artifacts(one, config_artifact(command), str(download / command))
        parse_config(commands[command], ["--config", settings], "t")  # the stage's own command reads it
    version = client.get_model_version_by_alias(REGISTERED_MODEL, "candidate")
    assert version.run_id == by_name["train"].info.run_id


@pytest.mark.slow
def test_pipeline_default_store(tmp_path: Path, tiny_model_dir: Path, monkeypatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cfg = PipelineConfig(workdir=str(tmp_path / "kw"), base_model=str(tiny_model_dir), max_steps=3,
                         max_new_tokens=8, max_length=512)
    result = run_pipeline(cfg)
    assert result.tracking_uri == f"sqlite:///{tmp_path / 'kw' / 'mlflow.db'}"
    assert result.version == "1"
    _check_store(result.tracking_uri, result.run_id, tmp_path / "settings")
    assert (tmp_path / "kw" / "curated" / "data.parquet").is_file()
    assert (tmp_path / "kw" / "evaluate" / "results.json").is_file()


@pytest.mark.slow
def test_pipeline_honours_mlflow_tracking_uri(tmp_path: Path, tiny_model_dir: Path, monkeypatch) -> None:
    uri = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    cfg = PipelineConfig(workdir=str(tmp_path / "kw"), base_model=str(tiny_model_dir), max_steps=2,
                         max_new_tokens=8, max_length=512)
    result = run_pipeline(cfg)
    assert result.tracking_uri == uri
    assert not (tmp_path / "kw" / "mlflow.db").exists()
    _check_store(uri, result.run_id, tmp_path / "settings")


@pytest.mark.gpu
def test_pipeline_command_on_a_cuda_host(tmp_path: Path, monkeypatch, capsys) -> None:
    """`kernelwright pipeline` on the embedded defaults (a few steps) finishes and records GPU figures."""
    from kernelwright.cli import main

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    workdir = tmp_path / "kw"
    assert main(["pipeline", "--workdir", str(workdir), "--max-steps", "4", "--max-new-tokens", "64"]) == 0
    out = capsys.readouterr().err
    assert "gpu_verified true" in out and "fast_0" in out
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    exp = client.get_experiment_by_name(EXPERIMENT)
    assert exp is not None
    parent = client.search_runs([exp.experiment_id], filter_string="tags.`kernelwright.stage` = 'pipeline'")
    assert len(parent) == 1
    _check_store(f"sqlite:///{workdir / 'mlflow.db'}", parent[0].info.run_id, tmp_path / "settings")
    assert str(client.get_model_version_by_alias(REGISTERED_MODEL, "candidate").version) == "1"
    assert (workdir / "evaluate" / "per_category.png").is_file()


def test_the_base_figure_comes_from_its_pretraining_record(tmp_path: Path) -> None:
    """The base's held-out bits per character, printed beside the trained model's: read from the record
    `base-model pretrain` leaves; a checkpoint without one (or with a broken one) has none."""
    base = tmp_path / "base"
    base.mkdir()
    (base / "config.json").write_text("{}")
    assert base_heldout_figure(base) is None and base_heldout_figure(None) is None
    (base / META_FILE).write_text(json.dumps({"heldout": {"bits_per_char": 1.43, "samples": 13}}))
    assert base_heldout_figure(base) == 1.43
    for broken in ("{not json", json.dumps({"heldout": 1.4}), json.dumps({"heldout": {"bits_per_char": "low"}})):
        (base / META_FILE).write_text(broken)
        assert base_heldout_figure(base) is None


@pytest.mark.slow
def test_pipeline_on_synthesized_pairs(tmp_path: Path, tiny_model_dir: Path, monkeypatch, capsys) -> None:
    """`--synth-tasks`: a synthesize run first, training on its pairs (unverified without a GPU), and the
    held-out compositions evaluated in their own run beside the seed evaluation."""
    from kernelwright.cli import main

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    workdir = tmp_path / "kw"
    argv = ["pipeline", "--workdir", str(workdir), "--base-model", str(tiny_model_dir), "--max-steps", "2",
            "--max-new-tokens", "8", "--max-length", "4096", "--synth-tasks", "200", "--synth-families",
            "elementwise", "rownorm", "--synth-eval-problems", "3", "--synth-with-seed"]
    assert main(argv) == 0
    out = capsys.readouterr().err
    assert "1/5 synthesize" in out and "5/5 evaluate_compositions" in out and "held-out compositions" in out
    client = MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    exp = client.get_experiment_by_name(EXPERIMENT)
    assert exp is not None
    runs = {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}
    assert {"pipeline", "synthesize", "curate", "train", "evaluate", "evaluate_compositions"} <= runs.keys()
    assert runs["evaluate_compositions"].data.metrics["evaluate.samples"] == 3
    assert runs["curate"].data.params["curate.input"].endswith("synthesize/train']")
    assert runs["curate"].data.params["curate.max_length"] == "4096"  # the job's: longer pairs dropped, not cut
    assert runs["curate"].data.params["curate.with_seed_split"] == "True"  # the seed training split beside them
    evaluated = sorted(p.name for p in (workdir / "synthesize-eval").glob("*.py"))
    assert len(evaluated) == 3 and {n.split("_")[0] for n in evaluated} == {"elementwise", "rownorm"}
    # each run's settings read back by its stage's own command, the stage configs the pipeline made included
    commands = {"synthesize": SynthesizeConfig, "curate": CurateConfig, "evaluate_compositions": EvaluateConfig}
    read = {}
    for name, cls in commands.items():
        command = "evaluate" if cls is EvaluateConfig else name
        settings = client.download_artifacts(runs[name].info.run_id, config_artifact(command), str(tmp_path / name))
        read[name] = parse_config(cls, ["--config", settings], "t")
    assert read["synthesize"].tasks == 200 and read["synthesize"].families == ["elementwise", "rownorm"]


def test_heldout_slice_takes_each_family_in_turn(tmp_path: Path) -> None:
    from kernelwright.errors import UsageError
    from kernelwright.pipeline import heldout_slice

    heldout = tmp_path / "heldout"
    for family, ids in (("gather", [3, 9]), ("elementwise", [1, 2, 5]), ("softmax", [])):
        (heldout / family).mkdir(parents=True)
        for i in ids:
            (heldout / family / f"{family}_{i:05d}.py").write_text("")
    out = heldout_slice(heldout, tmp_path / "eval", 4)
    assert sorted(p.name for p in out.iterdir()) == ["elementwise_00001.py", "elementwise_00002.py",
                                                      "gather_00003.py", "gather_00009.py"]
    assert len(list(heldout_slice(heldout, tmp_path / "eval", 0).iterdir())) == 5  # all; written afresh
    with pytest.raises(UsageError, match="no held-out compositions"):
        heldout_slice(tmp_path / "missing", tmp_path / "eval", 4)


def test_pipeline_config_refuses_negative_synthesis() -> None:
    with pytest.raises(ValueError, match="synth_tasks"):
        PipelineConfig(synth_tasks=-1)
    with pytest.raises(ValueError, match="synth_with_seed needs synth_tasks"):
        PipelineConfig(synth_with_seed=True)
    assert PipelineConfig().stages() == ["curate", "train", "evaluate"]
    assert PipelineConfig(synth_tasks=5).stages()[0] == "synthesize"
    assert PipelineConfig(base_max_steps=1500, synth_tasks=5).stages()[:2] == ["base-model", "synthesize"]
    with pytest.raises(ValueError, match="base_max_steps must be 0"):
        PipelineConfig(base_max_steps=-1)
    with pytest.raises(ValueError, match="with base_model there is none to pretrain"):
        PipelineConfig(base_max_steps=100, base_model="/models/m")


@pytest.mark.slow
def test_a_base_of_fixed_length_is_pretrained_once_for_every_stage(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setitem(SIZES, "tiny", replace(SIZES["micro"], corpus_chars=60_000, tokenizer_chars=30_000))
    started: list[str] = []
    cfg = PipelineConfig(workdir=str(tmp_path / "kw"), base_max_steps=6, max_steps=2, max_new_tokens=8,
                         max_length=512)
    result = run_pipeline(cfg, started.append)
    assert started == cfg.stages() == ["base-model", "curate", "train", "evaluate"]
    base = tmp_path / "kw" / "base-model"
    assert json.loads((base / META_FILE).read_text())["steps"] == 6
    client = MlflowClient(result.tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id])
    by_name = {r.info.run_name: r for r in runs}
    assert by_name["base-model"].data.tags["mlflow.parentRunId"] == result.run_id
    assert by_name["train"].data.params["kw.base_model_path"] == str(base)  # the stages took that base
    assert by_name["pipeline"].data.params["pipeline.base_max_steps"] == "6"  # as asked, in the job's record
