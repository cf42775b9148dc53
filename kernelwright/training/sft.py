"""The TRL SFT trainer for a `TrainConfig`: its SFTConfig, the LoRA config, the CuSeT collator."""

from __future__ import annotations

from pathlib import Path

import mlflow
import torch
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from trl import SFTConfig

from kernelwright.checkpoints import RunIdInCheckpoints
from kernelwright.training.config import TrainConfig
from kernelwright.training.cuset_trainer import CusetCollator, CusetSFTTrainer, checkpointing_args


def build_trainer(cfg: TrainConfig, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                  dataset: Dataset, output_dir: Path) -> CusetSFTTrainer:
    collator = CusetCollator(pad_token_id=tokenizer.pad_token_id, weighting=cfg.weighting, max_length=cfg.max_length)
    run = mlflow.active_run()
    return CusetSFTTrainer(
        callbacks=[RunIdInCheckpoints(run.info.run_id)] if run is not None else None,
        model=model,
        args=_sft_args(cfg, output_dir),
        train_dataset=dataset,
        processing_class=tokenizer,
        data_collator=collator,
        peft_config=_peft_config(cfg),
    )


def _sft_args(cfg: TrainConfig, output_dir: Path) -> SFTConfig:
    on_gpu = torch.cuda.is_available()
    bf16 = cfg.bf16 if cfg.bf16 is not None else on_gpu and torch.cuda.is_bf16_supported()
    checkpointing = cfg.gradient_checkpointing if cfg.gradient_checkpointing is not None else on_gpu
    return SFTConfig(
        output_dir=str(output_dir),
        max_steps=cfg.max_steps,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=max(1, cfg.max_steps // 20),
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        max_grad_norm=cfg.max_grad_norm,
        weight_decay=cfg.weight_decay,
        logging_steps=cfg.logging_steps,
        save_steps=cfg.save_steps,
        save_total_limit=2,
        seed=cfg.seed,
        train_sampling_strategy=cfg.sampling,
        bf16=bf16,
        fp16=False,
        **checkpointing_args(checkpointing),
        use_cpu=not on_gpu,
        report_to=["mlflow"] if mlflow.active_run() is not None else [],
        dataset_kwargs={"skip_prepare_dataset": True},
        max_length=cfg.max_length,
        dataloader_num_workers=0,
        disable_tqdm=False,
    )


def _peft_config(cfg: TrainConfig):
    if not cfg.lora:
        return None
    from peft import LoraConfig

    targets: str | list[str] = cfg.lora_target_modules
    if targets != "all-linear":
        targets = [t.strip() for t in cfg.lora_target_modules.split(",") if t.strip()]
    return LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules=targets, task_type="CAUSAL_LM")
