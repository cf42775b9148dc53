"""The trained model out: written to `<output_dir>/final` and logged and registered in MLflow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow
from mlflow.tracking import MlflowClient
from transformers import PreTrainedTokenizerBase

from kernelwright import atomic
from kernelwright.model_card import log_local_model
from kernelwright.models import load_base_model
from kernelwright.tracking import set_alias
from kernelwright.training.config import TrainConfig
from kernelwright.training.cuset_trainer import CusetSFTTrainer
from kernelwright.training.launch import is_main_process, world_size


def save_final(trainer: CusetSFTTrainer, cfg: TrainConfig, tokenizer: PreTrainedTokenizerBase, out: Path) -> Any:
    """Write the final model to `out` atomically; return it (in memory) for registration, or, under a
    multi-process launch, None (every rank takes part in gathering the sharded weights, the main one writes)."""
    if world_size() > 1:
        partial = out.with_name(f".{out.name}.partial")
        trainer.save_model(str(partial))  # gathers FSDP shards; writes on the main process only
        trainer.accelerator.wait_for_everyone()
        if is_main_process():

            def move(tmp: Path) -> None:
                tmp.rmdir()
                partial.rename(tmp)

            atomic.write_dir(out, move)
        return None
    model = trainer.model
    if cfg.lora and cfg.merge_lora:
        model = model.merge_and_unload()  # type: ignore[operator]

    def fill(tmp: Path) -> None:
        model.save_pretrained(tmp)  # type: ignore[operator]
        tokenizer.save_pretrained(tmp)

    atomic.write_dir(out, fill)
    return model


def register(cfg: TrainConfig, model: Any, tokenizer: PreTrainedTokenizerBase, base: Path, out: Path) -> str | None:
    """Log the model to the active run and register it; the version gets tag `weighting` and alias `cfg.alias`."""
    adapter_only = cfg.lora and not cfg.merge_lora
    if model is None:  # a multi-process run left its model on disk only (sharded in memory)
        model = _from_disk(out, adapter_only)
    info = log_local_model(
        {"model": model, "tokenizer": tokenizer}, "train",
        registered_model_name=cfg.registered_model if cfg.register else None,
        base_model_path=str(base) if adapter_only else None,
        pip_requirements=["kernelwright", "torch", "transformers", "peft"],
    )
    version = getattr(info, "registered_model_version", None)
    if not cfg.register or version is None:
        return None
    MlflowClient().set_model_version_tag(cfg.registered_model, str(version), "weighting", cfg.weighting)
    mlflow.set_tag("kw.registered_version", str(version))
    if cfg.alias:
        set_alias(str(version), cfg.alias, cfg.registered_model)
    return str(version)


def _from_disk(out: Path, adapter: bool) -> Any:
    """The final model as `out` holds it, on the CPU, for registration (MLflow cannot log a text-generation
    checkpoint folder by its path with this transformers): the adapter over its base, or the whole model."""
    if adapter:
        from peft import AutoPeftModelForCausalLM

        return AutoPeftModelForCausalLM.from_pretrained(str(out), local_files_only=True)
    return load_base_model(out, device="cpu")
