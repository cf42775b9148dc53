"""With no --base-model the stages get the pretrained tiny base: built once, then reused."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import mlflow
from mlflow.tracking import MlflowClient

from kernelwright.base_model import pretrain as pretrain_module
from kernelwright.base_model.choose import check_base_model, resolve_base_model
from kernelwright.base_model.config import SIZES
from kernelwright.base_model.pretrain import META_FILE
from kernelwright.tracking import setup_tracking, stage_run


def _fast_tiny(monkeypatch) -> None:
    """The tiny preset made micro-sized (a small slice of the installed code, seconds to train)."""
    fast = replace(SIZES["micro"], corpus_chars=60_000, tokenizer_chars=30_000, minutes=0.1)
    monkeypatch.setitem(SIZES, "tiny", fast)


def test_no_base_model_means_the_pretrained_tiny_base_built_once(tmp_path: Path, monkeypatch) -> None:
    _fast_tiny(monkeypatch)
    first = resolve_base_model(None, tmp_path)
    assert first == tmp_path / "base-model"
    meta = json.loads((first / META_FILE).read_text())
    assert meta["config"]["size"] == "tiny" and meta["steps"] > 0
    stamp = (first / "config.json").stat().st_mtime_ns
    calls = []
    monkeypatch.setattr(pretrain_module, "train_loop", lambda *a, **k: calls.append(a))
    assert resolve_base_model(None, tmp_path) == first  # reused: nothing trained
    assert calls == [] and (first / "config.json").stat().st_mtime_ns == stamp


def test_a_user_base_model_is_used_as_it_is(tiny_model_dir: Path, tmp_path: Path) -> None:
    check_base_model(str(tiny_model_dir))
    assert resolve_base_model(str(tiny_model_dir), tmp_path) == tiny_model_dir
    assert not (tmp_path / "base-model").exists()


def test_inside_a_stage_run_the_build_is_a_nested_base_model_run(tmp_path: Path, monkeypatch) -> None:
    _fast_tiny(monkeypatch)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    setup_tracking(tmp_path)
    with stage_run("curate") as parent:
        resolve_base_model(None, tmp_path)
        resolve_base_model(None, tmp_path)
    client = MlflowClient(mlflow.get_tracking_uri())
    children = client.search_runs([parent.info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert [r.info.run_name for r in children] == ["base-model"]
    assert children[0].data.params["base.size"] == "tiny"


def test_a_fixed_step_count_pretrains_exactly_that_many_and_a_new_count_rebuilds(tmp_path: Path, monkeypatch) -> None:
    _fast_tiny(monkeypatch)
    monkeypatch.setitem(SIZES, "tiny", replace(SIZES["tiny"], minutes=0.001))  # a budget that would stop it at once
    pinned = resolve_base_model(None, tmp_path, max_steps=7)
    meta = json.loads((pinned / META_FILE).read_text())
    assert meta["steps"] == 7 and meta["config"]["max_steps"] == 7  # the steps, not the machine's minutes
    assert resolve_base_model(None, tmp_path, max_steps=9) == pinned
    assert json.loads((pinned / META_FILE).read_text())["steps"] == 9  # another length is another base
