"""The train stage: CuSeT-weighted TRL SFT on curated Parquet, logged and registered in MLflow.

    kernelwright train                                   # <workdir>/curated, tiny base model
    kernelwright train --data DIR --base-model PATH --lora --max-steps 500
    kernelwright train --config kernelwright/configs/train-tiny-cpu.yaml --weighting plain
    kernelwright train --ablation plain,cuset            # one child run per weighting, same data and seed
    accelerate launch --config_file kernelwright/configs/accelerate-fsdp.yaml \
        -m kernelwright.cli train --config kernelwright/configs/train-fsdp.yaml --base-model PATH

Run again with the same output folder and it resumes from the last checkpoint into the same
MLflow run (the run id is saved beside and into the checkpoints); when the tracking store does
not hold that run (MLFLOW_TRACKING_URI changed), it warns and logs the resumed training to a new
run. Under `accelerate launch` only the main process talks to MLflow.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import mlflow
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from datasets import Dataset
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import RESOURCE_DOES_NOT_EXIST, ErrorCode
from mlflow.tracking import MlflowClient
from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback
from trl import SFTConfig

from kernelwright import atomic
from kernelwright.config import config_to_params
from kernelwright.errors import UsageError
from kernelwright.models import load_base_model, load_tokenizer, resolve_base_model
from kernelwright.tracking import REGISTERED_MODEL, log_curated_dataset, set_alias, setup_tracking
from kernelwright.training.cuset_trainer import (
    WEIGHT_COLUMNS,
    WEIGHTINGS,
    CusetCollator,
    CusetSFTTrainer,
    checkpointing_args,
)
from kernelwright.workdir import resolve_workdir

log = logging.getLogger(__name__)
RUN_ID_FILE = "mlflow_run_id.txt"
DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}


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
    ablation: str | None = field(
        default=None,
        metadata={"help": "Comma-separated weightings (e.g. plain,cuset) trained one after the other on the same data "
                          "and seed, as child runs train[<weighting>] of one parent run; `candidate` goes to the one "
                          "equal to --weighting, if listed. None: train --weighting only."},
    )
    lora: bool = field(
        default=False, metadata={"help": "Train a LoRA adapter instead of all weights. Excludes --full."}
    )
    full: bool = field(
        default=False, metadata={"help": "Train all weights (also what happens without --lora). Excludes --lora."}
    )
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA scaling numerator (scale = alpha / r)."})
    lora_dropout: float = field(default=0.0, metadata={"help": "Dropout on the LoRA path; 0: off."})
    lora_target_modules: str = field(
        default="all-linear", metadata={"help": "Comma-separated module names, or all-linear."}
    )
    merge_lora: bool = field(
        default=False, metadata={"help": "Merge the adapter into the base weights at the end (needs --lora)."}
    )
    max_steps: int = field(default=300, metadata={"help": "Optimizer steps."})
    learning_rate: float = field(default=2e-3, metadata={"help": "Peak LR (warm-up max_steps/20, then cosine)."})
    per_device_train_batch_size: int = field(default=4, metadata={"help": "Samples per device per micro-batch."})
    gradient_accumulation_steps: int = field(default=1, metadata={"help": "Micro-batches per optimizer step."})
    max_length: int | None = field(default=4096, metadata={"help": "Truncate sequences to this many tokens."})
    max_grad_norm: float = field(default=1.0, metadata={"help": "Clip the gradient norm to this; 0: no clipping."})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay; 0: off."})
    model_dtype: str = field(
        default="auto",
        metadata={"help": "Dtype the weights are loaded and trained in: auto (bfloat16 on a GPU, float32 on a CPU), "
                          "bfloat16 or float32 (fp32 master weights, e.g. full fine-tuning under FSDP)."},
    )
    bf16: bool | None = field(
        default=None,
        metadata={"help": "bfloat16 autocast. None: on with a bf16-capable GPU, off on a CPU (float32 there, so "
                          "runs compare exactly: TRL's own default, on, autocasts on a CPU too)."},
    )
    gradient_checkpointing: bool | None = field(
        default=None,
        metadata={"help": "Recompute activations in the backward (less memory, ~25%% more compute). "
                          "None: on with a GPU, off on a CPU."},
    )
    seed: int = field(default=0, metadata={"help": "Seed of data order, init of LoRA and dropout."})
    logging_steps: int = field(default=10, metadata={"help": "Log metrics every N steps."})
    save_steps: int = field(default=100, metadata={"help": "Checkpoint every N steps (for resume)."})
    output_dir: str | None = field(
        default=None, metadata={"help": "Checkpoints and final model. None: <workdir>/train."}
    )
    workdir: str | None = field(default=None, metadata={"help": "Work folder. None: ./.kernelwright."})
    register: bool = field(default=True, metadata={"help": "Register the model in the MLflow registry."})
    registered_model: str = field(default=REGISTERED_MODEL, metadata={"help": "Registered model name."})
    alias: str | None = field(default="candidate", metadata={"help": "Alias given to the new version; empty: none."})
    system_metrics: bool = field(
        default=True, metadata={"help": "Log CPU, memory, disk (and GPU with nvidia-ml-py) use to MLflow every 10 s."}
    )

    def __post_init__(self) -> None:
        for mode in (self.weighting, *self.ablation_modes):
            if mode not in WEIGHTINGS:
                raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, not {mode!r}")
        if self.ablation is not None and (not self.ablation_modes
                                          or len(set(self.ablation_modes)) != len(self.ablation_modes)):
            raise ValueError(f"ablation must list distinct weightings, e.g. plain,cuset, not {self.ablation!r}")
        if self.max_steps <= 0:
            raise ValueError("max_steps must be positive")
        if self.lora and self.full:
            raise ValueError("--lora and --full exclude each other (a config file's `lora: true` is undone with "
                             "--lora false)")
        if self.merge_lora and not self.lora:
            raise ValueError("--merge-lora needs --lora")
        if self.model_dtype not in ("auto", *DTYPES):
            raise ValueError(f"model_dtype must be auto, {', '.join(DTYPES)}, not {self.model_dtype!r}")

    @property
    def ablation_modes(self) -> list[str]:
        return [m.strip() for m in (self.ablation or "").split(",") if m.strip()]


@dataclass
class TrainResult:
    model_dir: Path
    run_id: str | None
    registered_version: str | None
    train_loss: float
    train_runtime_s: float


def check_curated(data_dir: Path) -> Path:
    """`data_dir/data.parquet`, checked (from its schema alone) to hold what `kernelwright curate` writes."""
    path = data_dir / "data.parquet"
    if not path.is_file():
        raise UsageError(f"{data_dir} holds no curated data (no data.parquet): make it with `kernelwright curate "
                         f"--out {data_dir}`, or pass --data with a folder that curate wrote")
    try:
        columns = pq.read_schema(path).names
    except (OSError, pa.ArrowException) as exc:
        raise UsageError(f"{path} is not a Parquet file ({exc}): remake it with `kernelwright curate`") from None
    missing = [c for c in ("input_ids", "labels", *WEIGHT_COLUMNS) if c not in columns]
    if missing:
        raise UsageError(f"{path} lacks column(s) {', '.join(missing)}: it was not written by `kernelwright curate`")
    return path


def load_curated(data_dir: Path) -> tuple[Dataset, dict[str, Any]]:
    ds = Dataset.from_parquet(str(check_curated(data_dir)))
    assert isinstance(ds, Dataset)
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


def _world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def _is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def _device() -> str:
    """This process's device: under `accelerate launch`/`torchrun` each rank loads onto its own GPU."""
    return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if torch.cuda.is_available() else "cpu"


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


class RunIdInCheckpoints(TrainerCallback):
    """Writes the MLflow run id into every checkpoint folder (a copied checkpoint still names its run)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and folder.is_dir():
            atomic.write_text(folder / RUN_ID_FILE, self.run_id)


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


def _save_final(trainer: CusetSFTTrainer, cfg: TrainConfig, tokenizer: PreTrainedTokenizerBase, out: Path) -> Any:
    """Write the final model to `out` atomically; return it (in memory) for registration, or, under a
    multi-process launch, None (every rank takes part in gathering the sharded weights, the main one writes)."""
    if _world_size() > 1:
        partial = out.with_name(f".{out.name}.partial")
        trainer.save_model(str(partial))  # gathers FSDP shards; writes on the main process only
        trainer.accelerator.wait_for_everyone()
        if _is_main_process():

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


def _register(cfg: TrainConfig, model: Any, tokenizer: PreTrainedTokenizerBase, base: Path, out: Path) -> str | None:
    """Log the model to the active run and register it; the version gets tag `weighting` and alias `cfg.alias`."""
    adapter_only = cfg.lora and not cfg.merge_lora
    info = mlflow.transformers.log_model(  # type: ignore[attr-defined]
        # a multi-process run left its model on disk only (sharded in memory)
        transformers_model=str(out) if model is None else {"model": model, "tokenizer": tokenizer},
        name="model",
        task="text-generation",
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


def check_args(cfg: TrainConfig) -> None:
    """What can be checked without a model or an MLflow store: run before either is touched."""
    if _world_size() > 1 and cfg.lora:
        raise UsageError("LoRA runs in one process (a 7B model's LoRA fits on one H200): use --full under FSDP")
    check_curated(_data_dir(cfg))


def run_train(cfg: TrainConfig) -> TrainResult:
    """Train one weighting; inside an active MLflow run, log everything to it and register the model."""
    if cfg.ablation is not None:
        raise UsageError("run_train trains one weighting: use run_ablation for --ablation")
    check_args(cfg)
    workdir = resolve_workdir(cfg.workdir)
    data_dir = _data_dir(cfg)
    output_dir = _output_dir(cfg)
    dataset, cuset = load_curated(data_dir)
    dataset = drop_unlearnable(dataset, cfg.max_length)
    base = resolve_base_model(cfg.base_model, workdir)
    tokenizer = load_tokenizer(base)
    model = load_base_model(base, dtype=DTYPES.get(cfg.model_dtype), device=_device())  # auto: its default
    output_dir.mkdir(parents=True, exist_ok=True)
    last = last_complete_checkpoint(output_dir)
    run = mlflow.active_run()
    if run is not None:
        atomic.write_text(output_dir / RUN_ID_FILE, run.info.run_id)
        mlflow.log_params({**config_to_params(cfg, "kw."), **{f"cuset.{k}": str(v) for k, v in cuset.items()},
                           "kw.base_model_path": str(base)})
        mlflow.set_tags({"kw.weighting": cfg.weighting, "kw.method": "lora" if cfg.lora else "full",
                         "kw.resumed_from": str(last)})  # a tag: it changes when a killed run resumes
        log_curated_dataset(data_dir / "data.parquet", context="train")
    torch.manual_seed(cfg.seed)
    trainer = build_trainer(cfg, model, tokenizer, dataset, output_dir)
    result = trainer.train(resume_from_checkpoint=last)
    final = _save_final(trainer, cfg, tokenizer, output_dir / "final")
    version = _register(cfg, final, tokenizer, base, output_dir / "final") if run is not None else None
    return TrainResult(model_dir=output_dir / "final", run_id=run.info.run_id if run else None,
                       registered_version=version, train_loss=float(result.training_loss),
                       train_runtime_s=float(result.metrics.get("train_runtime", 0.0)))


def _output_dir(cfg: TrainConfig) -> Path:
    return Path(cfg.output_dir) if cfg.output_dir else resolve_workdir(cfg.workdir) / "train"


def _data_dir(cfg: TrainConfig) -> Path:
    return Path(cfg.data) if cfg.data else resolve_workdir(cfg.workdir) / "curated"


def ablation_configs(cfg: TrainConfig) -> list[TrainConfig]:
    """One config per listed weighting: same data, seed and steps, output in <output_dir>/<weighting>; only the
    weighting equal to `cfg.weighting` keeps the alias (`candidate`)."""
    out = _output_dir(cfg)
    return [replace(cfg, weighting=mode, ablation=None, output_dir=str(out / mode),
                    alias=cfg.alias if mode == cfg.weighting else None) for mode in cfg.ablation_modes]


def _finished(child: TrainConfig, run_id: str | None) -> TrainResult | None:
    """The result of a weighting an earlier run of the same ablation (MLflow run `run_id`) already trained and
    registered."""
    final = _output_dir(child) / "final"
    if run_id is None or not final.is_dir():
        return None
    run = MlflowClient().get_run(run_id)
    version = run.data.tags.get("kw.registered_version")
    if child.register and version is None:
        return None
    return TrainResult(model_dir=final, run_id=run_id, registered_version=version,
                       train_loss=run.data.metrics.get("train_loss", float("nan")),
                       train_runtime_s=run.data.metrics.get("train_runtime", 0.0))


def run_ablation(cfg: TrainConfig) -> list[TrainResult]:
    """Train each weighting of `cfg.ablation` as a child run `train[<weighting>]` of the active run.

    The parent run gets every config value as a param and, per weighting, tag
    `kw.ablation.<weighting>.version`, so that evaluation can compare the versions side by side. Run
    the same command again after a kill: the parent run is resumed, weightings already registered are
    kept, an interrupted one resumes from its checkpoint into its own child run.
    """
    parent = mlflow.active_run()
    if parent is not None:
        atomic.write_text(_output_dir(cfg) / RUN_ID_FILE, parent.info.run_id)
        mlflow.log_params(config_to_params(cfg, "kw."))
    results = []
    for child in ablation_configs(cfg):
        if parent is None:
            results.append(run_train(child))
            continue
        run_id = resumable_run_id(child)
        result = _finished(child, run_id)
        if result is None:
            with mlflow.start_run(run_id=run_id, nested=True, run_name=f"train[{child.weighting}]",
                                  tags={"kernelwright.stage": "train", "kw.weighting": child.weighting},
                                  log_system_metrics=child.system_metrics):
                result = run_train(child)
        results.append(result)
        mlflow.set_tag(f"kw.ablation.{child.weighting}.version", str(result.registered_version))
        mlflow.log_metric(f"{child.weighting}.train_loss", result.train_loss)
    return results


def resume_run_id(cfg: TrainConfig) -> str | None:
    """The MLflow run a previous, interrupted `train` into the same output folder was logging to."""
    output_dir = _output_dir(cfg)
    f = output_dir / RUN_ID_FILE
    if not f.is_file():
        return None
    children = [_output_dir(c) for c in ablation_configs(cfg)] if cfg.ablation else [output_dir]
    if any(last_complete_checkpoint(d) is not None for d in children):
        return f.read_text().strip() or None
    return None


def resumable_run_id(cfg: TrainConfig) -> str | None:
    """`resume_run_id`, if the current tracking store holds that run; else None, with a warning: training still
    resumes from the checkpoint (weights, optimizer, step), logged to a new run."""
    run_id = resume_run_id(cfg)
    if run_id is None or _store_has_run(run_id):
        return run_id
    log.warning("%s holds checkpoints of MLflow run %s, which the tracking store %s does not hold (was "
                "MLFLOW_TRACKING_URI changed?): training resumes from the checkpoint, logged to a new run",
                _output_dir(cfg), run_id, mlflow.get_tracking_uri())
    return None


def _store_has_run(run_id: str) -> bool:
    """Whether the current tracking store holds run `run_id`, not deleted (a deleted run cannot be resumed)."""
    try:
        return MlflowClient().get_run(run_id).info.lifecycle_stage == "active"
    except MlflowException as exc:
        if exc.error_code == ErrorCode.Name(RESOURCE_DOES_NOT_EXIST):
            return False
        raise


def train_command(cfg: TrainConfig) -> list[TrainResult]:
    """What `kernelwright train` runs: the arguments checked, then the work folder's MLflow store, one run
    (resumed when a previous run into the same output folder was killed and the store holds it), one weighting
    or an ablation. Other ranks of a multi-process launch train without MLflow."""
    check_args(cfg)
    if not _is_main_process():
        return run_ablation(cfg) if cfg.ablation else [run_train(cfg)]
    setup_tracking(resolve_workdir(cfg.workdir))
    run_id = resumable_run_id(cfg)
    name = "train-ablation" if cfg.ablation else "train"
    with mlflow.start_run(run_id=run_id, run_name=None if run_id else name,
                          tags=None if run_id else {"kernelwright.stage": name},
                          log_system_metrics=cfg.system_metrics and not cfg.ablation):
        return run_ablation(cfg) if cfg.ablation else [run_train(cfg)]
