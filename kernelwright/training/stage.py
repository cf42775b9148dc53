"""The train stage: CuSeT-weighted TRL SFT on curated Parquet, logged and registered in MLflow.

    kernelwright train                                   # <workdir>/curated, tiny base model
    kernelwright train --data DIR --base-model PATH --lora --max-steps 500
    kernelwright train --config configs/train-tiny-cpu.yaml --weighting plain

Run again with the same output folder and it resumes from the last checkpoint into the same
MLflow run (the run id is saved beside the checkpoints).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlflow
import torch
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from trl import SFTConfig

from kernelwright import atomic
from kernelwright.config import config_to_params
from kernelwright.errors import UsageError
from kernelwright.tracking import REGISTERED_MODEL, log_curated_dataset, set_alias
from kernelwright.training.base_model import load_base_model, load_tokenizer, resolve_base_model
from kernelwright.training.cuset_trainer import WEIGHT_COLUMNS, WEIGHTINGS, CusetCollator, CusetSFTTrainer
from kernelwright.workdir import resolve_workdir

log = logging.getLogger(__name__)
RUN_ID_FILE = "mlflow_run_id.txt"


@dataclass
class TrainConfig:
    """Config of `kernelwright train`."""

    data: str | None = field(
        default=None, metadata={"help": "Curated folder (data.parquet). None: <workdir>/curated."}
    )
    base_model: str | None = field(
        default=None, metadata={"help": "Local HF checkpoint to fine-tune. None: the tiny local model."}
    )
    weighting: str = field(
        default="cuset", metadata={"help": "Loss weighting: plain, token (masking+alpha), region (w_s), cuset (both)."}
    )
    lora: bool = field(default=False, metadata={"help": "Train a LoRA adapter instead of all weights."})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA scaling numerator (scale = alpha / r)."})
    lora_dropout: float = field(default=0.0, metadata={"help": "Dropout on the LoRA path; 0: off."})
    lora_target_modules: str = field(
        default="all-linear", metadata={"help": "Comma-separated module names, or all-linear."}
    )
    merge_lora: bool = field(default=False, metadata={"help": "Merge the adapter into the base weights at the end."})
    max_steps: int = field(default=300, metadata={"help": "Optimizer steps."})
    learning_rate: float = field(default=2e-3, metadata={"help": "Peak LR (warm-up max_steps/20, then cosine)."})
    per_device_train_batch_size: int = field(default=4, metadata={"help": "Samples per device per micro-batch."})
    gradient_accumulation_steps: int = field(default=1, metadata={"help": "Micro-batches per optimizer step."})
    max_length: int | None = field(default=4096, metadata={"help": "Truncate sequences to this many tokens."})
    seed: int = field(default=0, metadata={"help": "Seed of data order, init of LoRA and dropout."})
    logging_steps: int = field(default=10, metadata={"help": "Log metrics every N steps."})
    save_steps: int = field(default=100, metadata={"help": "Checkpoint every N steps (for resume)."})
    output_dir: str | None = field(
        default=None, metadata={"help": "Checkpoints and final model. None: <workdir>/train."}
    )
    workdir: str | None = field(default=None, metadata={"help": "Work folder. None: ./.kernelwright."})
    register: bool = field(default=True, metadata={"help": "Register the model in the MLflow registry."})
    registered_model: str = field(default=REGISTERED_MODEL, metadata={"help": "Registered model name."})
    alias: str = field(default="candidate", metadata={"help": "Alias given to the new version."})

    def __post_init__(self) -> None:
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, not {self.weighting!r}")
        if self.max_steps <= 0:
            raise ValueError("max_steps must be positive")


@dataclass
class TrainResult:
    model_dir: Path
    run_id: str | None
    registered_version: str | None
    train_loss: float
    train_runtime_s: float


def load_curated(data_dir: Path) -> tuple[Dataset, dict[str, Any]]:
    path = data_dir / "data.parquet"
    if not path.is_file():
        raise UsageError(f"no curated data at {path}: run `kernelwright curate` first or pass --data")
    ds = Dataset.from_parquet(str(path))
    assert isinstance(ds, Dataset)
    missing = [c for c in ("input_ids", "labels", *WEIGHT_COLUMNS) if c not in ds.column_names]
    if missing:
        raise UsageError(f"{path} lacks column(s) {', '.join(missing)}: it was not written by `kernelwright curate`")
    cuset_file = data_dir / "cuset.json"
    cuset = json.loads(cuset_file.read_text()) if cuset_file.is_file() else {}
    return ds.select_columns(["input_ids", "labels", *WEIGHT_COLUMNS]), cuset


def last_complete_checkpoint(output_dir: Path) -> str | None:
    """The newest checkpoint whose save finished (the Trainer writes trainer_state.json last).

    A run killed while writing a checkpoint leaves a partial folder; resuming skips it.
    """
    found = [(int(p.name.rsplit("-", 1)[1]), p) for p in output_dir.glob("checkpoint-*")
             if p.name.rsplit("-", 1)[1].isdigit() and (p / "trainer_state.json").is_file()]
    return str(max(found)[1]) if found else None


def drop_unlearnable(dataset: Dataset, max_length: int | None) -> Dataset:
    """Drop samples whose completion lies wholly past `max_length` (they would train on nothing)."""
    keep = dataset.filter(lambda e: any(label != -100 for label in e["labels"][:max_length]))
    if len(keep) == 0:
        raise UsageError(f"max_length={max_length} cuts off every completion: no sample has a token to learn from")
    if len(keep) < len(dataset):
        log.warning("max_length=%s cuts off the whole completion of %d of %d samples: dropped",
                    max_length, len(dataset) - len(keep), len(dataset))
    return keep


def _peft_config(cfg: TrainConfig):
    if not cfg.lora:
        return None
    from peft import LoraConfig

    targets: str | list[str] = cfg.lora_target_modules
    if targets != "all-linear":
        targets = [t.strip() for t in cfg.lora_target_modules.split(",") if t.strip()]
    return LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules=targets, task_type="CAUSAL_LM")


def _sft_args(cfg: TrainConfig, output_dir: Path) -> SFTConfig:
    on_gpu = torch.cuda.is_available()
    return SFTConfig(
        output_dir=str(output_dir),
        max_steps=cfg.max_steps,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=max(1, cfg.max_steps // 20),
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        logging_steps=cfg.logging_steps,
        save_steps=cfg.save_steps,
        save_total_limit=2,
        seed=cfg.seed,
        bf16=on_gpu and torch.cuda.is_bf16_supported(),
        use_cpu=not on_gpu,
        report_to=["mlflow"] if mlflow.active_run() is not None else [],
        dataset_kwargs={"skip_prepare_dataset": True},
        max_length=cfg.max_length,
        dataloader_num_workers=0,
        disable_tqdm=False,
    )


def build_trainer(cfg: TrainConfig, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                  dataset: Dataset, output_dir: Path) -> CusetSFTTrainer:
    collator = CusetCollator(pad_token_id=tokenizer.pad_token_id, weighting=cfg.weighting, max_length=cfg.max_length)
    return CusetSFTTrainer(
        model=model,
        args=_sft_args(cfg, output_dir),
        train_dataset=dataset,
        processing_class=tokenizer,
        data_collator=collator,
        peft_config=_peft_config(cfg),
    )


def _save_final(trainer: CusetSFTTrainer, cfg: TrainConfig, tokenizer: PreTrainedTokenizerBase, out: Path) -> Any:
    model = trainer.model
    if cfg.lora and cfg.merge_lora:
        model = model.merge_and_unload()  # type: ignore[operator]

    def fill(tmp: Path) -> None:
        model.save_pretrained(tmp)  # type: ignore[operator]
        tokenizer.save_pretrained(tmp)

    atomic.write_dir(out, fill)
    return model


def _register(cfg: TrainConfig, model: Any, tokenizer: PreTrainedTokenizerBase, base: Path) -> str | None:
    adapter_only = cfg.lora and not cfg.merge_lora
    info = mlflow.transformers.log_model(  # type: ignore[attr-defined]
        transformers_model={"model": model, "tokenizer": tokenizer},
        name="model",
        task="text-generation",
        registered_model_name=cfg.registered_model if cfg.register else None,
        base_model_path=str(base) if adapter_only else None,
        pip_requirements=["kernelwright", "torch", "transformers", "peft"],
    )
    version = getattr(info, "registered_model_version", None)
    if cfg.register and version is not None:
        set_alias(str(version), cfg.alias, cfg.registered_model)
        return str(version)
    return None


def run_train(cfg: TrainConfig) -> TrainResult:
    workdir = resolve_workdir(cfg.workdir)
    data_dir = Path(cfg.data) if cfg.data else workdir / "curated"
    output_dir = Path(cfg.output_dir) if cfg.output_dir else workdir / "train"
    dataset, cuset = load_curated(data_dir)
    dataset = drop_unlearnable(dataset, cfg.max_length)
    base = resolve_base_model(cfg.base_model, workdir)
    tokenizer = load_tokenizer(base)
    model = load_base_model(base, dtype=torch.float32 if not torch.cuda.is_available() else None)
    output_dir.mkdir(parents=True, exist_ok=True)
    last = last_complete_checkpoint(output_dir)
    run = mlflow.active_run()
    if run is not None:
        atomic.write_text(output_dir / RUN_ID_FILE, run.info.run_id)
        mlflow.log_params({**config_to_params(cfg, "kw."), **{f"cuset.{k}": str(v) for k, v in cuset.items()},
                           "kw.base_model_path": str(base)})
        mlflow.set_tag("kw.resumed_from", str(last))  # a tag: it changes when a killed run resumes
        log_curated_dataset(data_dir / "data.parquet", context="train")
    torch.manual_seed(cfg.seed)
    trainer = build_trainer(cfg, model, tokenizer, dataset, output_dir)
    result = trainer.train(resume_from_checkpoint=last)
    final = _save_final(trainer, cfg, tokenizer, output_dir / "final")
    version = _register(cfg, final, tokenizer, base) if run is not None else None
    return TrainResult(model_dir=output_dir / "final", run_id=run.info.run_id if run else None,
                       registered_version=version, train_loss=float(result.training_loss),
                       train_runtime_s=float(result.metrics.get("train_runtime", 0.0)))


def resume_run_id(cfg: TrainConfig) -> str | None:
    """The MLflow run a previous, interrupted `train` into the same output folder was logging to."""
    workdir = resolve_workdir(cfg.workdir)
    output_dir = Path(cfg.output_dir) if cfg.output_dir else workdir / "train"
    f = output_dir / RUN_ID_FILE
    if f.is_file() and last_complete_checkpoint(output_dir) is not None:
        return f.read_text().strip() or None
    return None
