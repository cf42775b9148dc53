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

The curated data is read in `data`, the trainer built in `sft`, checkpoints and the run to resume
into found in `resume`, the final model saved and registered in `final_model`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mlflow
import torch
from mlflow.tracking import MlflowClient

from kernelwright import atomic
from kernelwright.base_model.choose import resolve_base_model
from kernelwright.code_state import tag_code_state
from kernelwright.config import config_to_params
from kernelwright.digest import file_sha256
from kernelwright.errors import UsageError
from kernelwright.models import load_base_model, load_tokenizer
from kernelwright.store import Store
from kernelwright.tracking import log_config, log_curated_dataset, tracking_session
from kernelwright.training.config import TrainConfig
from kernelwright.training.data import check_curated, drop_unlearnable, load_curated
from kernelwright.training.final_model import register, save_final
from kernelwright.training.launch import device, is_main_process, world_size
from kernelwright.training.resume import (
    RUN_ID_FILE,
    ablation_configs,
    changed_settings,
    changed_since_begun,
    last_complete_checkpoint,
    output_dir_of,
    record_begun_with,
    resumable_run_id,
)
from kernelwright.training.sft import build_trainer
from kernelwright.workdir import resolve_workdir

DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}


@dataclass
class TrainResult:
    model_dir: Path
    run_id: str | None
    registered_version: str | None
    train_loss: float
    train_runtime_s: float
    base_dir: Path | None = None  # the base checkpoint it was trained from


def check_train_config(cfg: TrainConfig) -> None:
    """What can be checked without a model or an MLflow store: run before either is touched."""
    if world_size() > 1 and cfg.lora:
        raise UsageError("LoRA runs in one process (a 7B model's LoRA fits on one H200): use --full under FSDP")
    check_curated(_data_dir(cfg))


def run_train(cfg: TrainConfig) -> TrainResult:
    """Train one weighting; inside an active MLflow run, log everything to it and register the model."""
    if cfg.ablation is not None:
        raise UsageError("run_train trains one weighting: use run_ablation for --ablation")
    check_train_config(cfg)
    workdir = resolve_workdir(cfg.workdir)
    data_dir = _data_dir(cfg)
    output_dir = output_dir_of(cfg)
    dataset, cuset = load_curated(data_dir)
    dataset = drop_unlearnable(dataset, cfg.max_length)
    base = resolve_base_model(cfg.base_model, workdir)
    run = mlflow.active_run()
    params = {**config_to_params(cfg, "kw."), **{f"cuset.{k}": str(v) for k, v in cuset.items()},
              "kw.base_model_path": str(base)}
    changed = changed_settings(run.info.run_id, params) if run is not None else []
    begun_with = {"kw.data_sha256": file_sha256(data_dir / "data.parquet")}  # the data, whatever run logs it
    changed += changed_since_begun(output_dir, begun_with)
    if changed:  # before any model loads: a run resumes with the settings and data it was begun with
        raise UsageError(f"{output_dir} holds a run begun with other settings ({'; '.join(changed[:4])}): run the "
                         "same settings on the same data to resume it, or pass --output-dir (or another --workdir) "
                         "for a new one")
    tokenizer = load_tokenizer(base)
    model = load_base_model(base, dtype=DTYPES.get(cfg.model_dtype), device=device())  # auto: its default
    output_dir.mkdir(parents=True, exist_ok=True)
    last = last_complete_checkpoint(output_dir)
    if is_main_process():
        record_begun_with(output_dir, begun_with)
    if run is not None:
        atomic.write_text(output_dir / RUN_ID_FILE, run.info.run_id)
        mlflow.log_params(params)
        log_config(cfg, "train")
        mlflow.set_tags({"kw.weighting": cfg.weighting, "kw.method": "lora" if cfg.lora else "full",
                         "kw.resumed_from": str(last)})  # a tag: it changes when a killed run resumes
        log_curated_dataset(data_dir / "data.parquet", context="train")
    torch.manual_seed(cfg.seed)
    trainer = build_trainer(cfg, model, tokenizer, dataset, output_dir)
    result = trainer.train(resume_from_checkpoint=last)
    final = save_final(trainer, cfg, tokenizer, output_dir / "final")
    version = register(cfg, final, tokenizer, base, output_dir / "final") if run is not None else None
    return TrainResult(model_dir=output_dir / "final", run_id=run.info.run_id if run else None,
                       registered_version=version, train_loss=float(result.training_loss),
                       train_runtime_s=float(result.metrics.get("train_runtime", 0.0)), base_dir=base)


def _data_dir(cfg: TrainConfig) -> Path:
    """The curated folder: --data, else <workdir>/curated."""
    return Path(cfg.data) if cfg.data else resolve_workdir(cfg.workdir) / "curated"


def _finished(child: TrainConfig, run_id: str | None) -> TrainResult | None:
    """The result of a weighting an earlier run of the same ablation (MLflow run `run_id`) already trained and
    registered."""
    final = output_dir_of(child) / "final"
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
        atomic.write_text(output_dir_of(cfg) / RUN_ID_FILE, parent.info.run_id)
        mlflow.log_params(config_to_params(cfg, "kw."))
        log_config(cfg, "train")
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


def train_command(cfg: TrainConfig) -> list[TrainResult]:
    """What `kernelwright train` runs: the arguments checked, then the MLflow store (--tracking-uri, else the work
    folder's), one run (resumed when a previous run into the same output folder was killed and the store holds it),
    one weighting or an ablation. Other ranks of a multi-process launch train without MLflow."""
    check_train_config(cfg)
    if not is_main_process():
        return run_ablation(cfg) if cfg.ablation else [run_train(cfg)]
    with tracking_session(Store.of(cfg)):
        run_id = resumable_run_id(cfg)
        name = "train-ablation" if cfg.ablation else "train"
        with mlflow.start_run(run_id=run_id, run_name=None if run_id else name,
                              tags=None if run_id else {"kernelwright.stage": name},
                              log_system_metrics=cfg.system_metrics and not cfg.ablation):
            tag_code_state()
            return run_ablation(cfg) if cfg.ablation else [run_train(cfg)]
