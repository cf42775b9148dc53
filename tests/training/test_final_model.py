"""Registering the final model a multi-process run left on disk only (its ranks held shards, none the whole)."""

from __future__ import annotations

import shutil
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from kernelwright.models import load_base_model, load_tokenizer
from kernelwright.tracking import setup_tracking
from kernelwright.training.config import TrainConfig
from kernelwright.training.final_model import register


@pytest.mark.parametrize("adapter", [False, True])
def test_a_final_model_on_disk_only_is_registered(tiny_model_dir: Path, tmp_path: Path, adapter: bool) -> None:
    """MLflow cannot log a text-generation folder by its path with this transformers (its pipeline lookup
    fails): the folder is loaded and logged as a model, a LoRA adapter over its base."""
    out = tmp_path / "final"
    if adapter:
        from peft import LoraConfig, get_peft_model

        lora = get_peft_model(load_base_model(tiny_model_dir, device="cpu"),
                              LoraConfig(r=2, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
        lora.save_pretrained(out)
    else:
        shutil.copytree(tiny_model_dir, out)
    cfg = TrainConfig(lora=adapter, alias=None)
    setup_tracking(tmp_path / "store")
    with mlflow.start_run():
        version = register(cfg, None, load_tokenizer(tiny_model_dir), tiny_model_dir, out)
    assert version == "1"
    assert [v.version for v in MlflowClient().search_model_versions(f"name='{cfg.registered_model}'")] == [1]
