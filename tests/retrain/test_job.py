"""`kernelwright retrain` end to end on a CPU, with a generator and a GPU-verifier double: promotion,
skipping, a worse candidate, a champion evaluated again in a new scope, rollback, pruning (the run
without a GPU is in test_resume.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from kernelwright.base_model.config import SIZES
from kernelwright.base_model.pretrain import META_FILE
from kernelwright.cli import main
from kernelwright.evaluation.registry import CHAMPION, PREVIOUS_CHAMPION, alias_version
from kernelwright.retrain.job import run_retrain
from kernelwright.tracking import EXPERIMENT, REGISTERED_MODEL
from tests.retrain._doubles import on_a_fake_gpu, tiny_retrain

TAG = "kw.retrain."


def _children(client: MlflowClient, run_id: str) -> list[str]:
    exp = client.get_experiment_by_name(EXPERIMENT)
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{run_id}'")
    return sorted(r.info.run_name for r in runs)


def _aliases() -> tuple[str | None, str | None]:
    return alias_version(REGISTERED_MODEL, CHAMPION), alias_version(REGISTERED_MODEL, PREVIOUS_CHAMPION)


@pytest.mark.slow
def test_retrain_promotes_skips_rejects_reevaluates_and_rolls_back(
        tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    gpu = on_a_fake_gpu(monkeypatch)
    client = MlflowClient(f"sqlite:///{tmp_path / 'kw' / 'mlflow.db'}")

    gpu.speeds["1"] = {"affine": 1.5, "relu_nonneg": 0.8}  # fast_1 0.5
    first = run_retrain(tiny_retrain(tmp_path, tiny_model_dir), verifier=gpu)
    assert (first.decision, first.reason, first.candidate_version, first.champion_version) == (
        "promoted", "no champion yet", "1", "1")
    assert first.candidate == {"fast_0": 1.0, "fast_1": 0.5, "compile_rate": 1.0}
    parent = client.get_run(first.run_id)
    assert parent.data.tags[f"{TAG}decision"] == "promoted" and parent.data.tags[f"{TAG}watermark"] == first.watermark
    assert {f"{TAG}digest.corpus", f"{TAG}digest.train_config", f"{TAG}digest.base_model"} <= parent.data.tags.keys()
    assert _children(client, first.run_id) == ["curate", "evaluate", "train"]
    assert client.get_model_version(REGISTERED_MODEL, "1").tags["kw.gate.decision"] == "promoted"

    again = run_retrain(tiny_retrain(tmp_path, tiny_model_dir), verifier=gpu)
    assert again.decision == "skipped" and first.run_id in again.reason
    assert client.get_run(again.run_id).data.tags[f"{TAG}same_as"] == first.run_id
    assert _children(client, again.run_id) == [] and alias_version(REGISTERED_MODEL, CHAMPION) == "1"

    gpu.speeds["2"] = {"affine": 0.9, "relu_nonneg": 0.9}  # new data, a worse model: fast_1 0
    worse = run_retrain(tiny_retrain(tmp_path, tiny_model_dir, tasks=6), verifier=gpu)
    assert (worse.decision, worse.reason, worse.candidate_version) == ("rejected", "fast_1 did not improve", "2")
    assert worse.watermark != first.watermark
    assert _aliases() == ("1", None)
    assert alias_version(REGISTERED_MODEL, "candidate") == "2"

    gpu.speeds["2"] = {"affine": 2.0, "relu_nonneg": 2.0}  # a new scope (2 samples): v2 again, v1 evaluated again
    gpu.evaluated.clear()
    gpu.generation_configs.clear()
    rescoped = run_retrain(tiny_retrain(tmp_path, tiny_model_dir, tasks=6, samples=2, temperature=0.7,
                                        eval_batch_size=3), verifier=gpu)
    assert (rescoped.decision, rescoped.candidate_version, rescoped.champion_version) == ("promoted", "2", "2")
    assert {(c.samples, c.temperature, c.batch_size) for c in gpu.generation_configs} == {(2, 0.7, 3)}
    assert _children(client, rescoped.run_id) == ["evaluate", "evaluate[champion]"]  # not trained again
    assert sorted(set(gpu.evaluated)) == ["1", "2"] and len(gpu.evaluated) == 8
    assert alias_version(REGISTERED_MODEL, PREVIOUS_CHAMPION) == "1"

    workdir = str(tmp_path / "kw")
    assert main(["promote", "--rollback", "--workdir", workdir]) == 0
    assert _aliases() == ("1", None)
    assert main(["promote", "--rollback", "--workdir", workdir]) == 2  # nothing left to roll back to
    assert main(["promote", "--version", "9", "--workdir", workdir]) == 2
    assert main(["promote", "--version", "2", "--workdir", workdir]) == 0
    assert _aliases() == ("2", "1")
    kept = sorted(p.name for p in (tmp_path / "kw" / "retrain").glob("train-*/checkpoint-*"))
    assert kept == ["checkpoint-2", "checkpoint-2"]  # one kept per finished training (keep_checkpoints 1)


def test_bad_input_is_refused_before_the_store_is_touched(tmp_path: Path) -> None:
    workdir = tmp_path / "kw"
    assert main(["retrain", "--workdir", str(workdir), "--input", str(tmp_path / "missing.jsonl")]) == 2
    assert main(["retrain", "--workdir", str(workdir), "--margin", "3"]) == 2
    assert main(["retrain", "--workdir", str(workdir), "--temperature", "-1"]) == 2
    assert main(["retrain", "--workdir", str(workdir), "--suite", str(tmp_path / "no-suite")]) == 2
    (tmp_path / "r.yaml").write_text("max_stepz: 3\n")
    assert main(["retrain", "--config", str(tmp_path / "r.yaml")]) == 2
    assert main(["promote", "--workdir", str(workdir)]) == 2  # neither --rollback nor --version
    assert not (workdir / "mlflow.db").exists()


@pytest.mark.slow
def test_a_base_of_fixed_length_is_pretrained_once_and_trained_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setitem(SIZES, "tiny", replace(SIZES["micro"], corpus_chars=60_000, tokenizer_chars=30_000))
    gpu = on_a_fake_gpu(monkeypatch)
    asked = replace(tiny_retrain(tmp_path, tmp_path), base_model=None, base_max_steps=5, max_length=4096)
    done = run_retrain(asked, verifier=gpu)
    base = tmp_path / "kw" / "base-model"
    assert json.loads((base / META_FILE).read_text())["steps"] == 5
    client = MlflowClient(f"sqlite:///{tmp_path / 'kw' / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id],
                              filter_string=f"tags.mlflow.parentRunId = '{done.run_id}'")
    train = next(r for r in runs if r.info.run_name == "train")
    assert train.data.params["kw.base_model_path"] == str(base)
