"""The whole job on the embedded defaults: curate -> train -> evaluate, one MLflow parent run.

    kernelwright pipeline                      # seed corpus, tiny local model, ./.kernelwright
    kernelwright pipeline --max-steps 50 --workdir /tmp/kw

Each stage is a child run (`curate`, `train`, `evaluate`) of a `pipeline` parent run; the
trained model becomes a new version of `kernelwright-coder` with alias `candidate`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import mlflow

from kernelwright.base_model.choose import check_base_model
from kernelwright.config import config_to_params
from kernelwright.curation.config import CurateConfig
from kernelwright.curation.stage import run_curate
from kernelwright.evaluation.stage import EvaluateConfig, EvaluateResult, evaluate
from kernelwright.tracking import REGISTERED_MODEL, setup_tracking, stage_run
from kernelwright.training.config import TrainConfig
from kernelwright.training.stage import run_train
from kernelwright.workdir import TRACKING_URI_HELP, resolve_workdir, tracking_env, tracking_uri

log = logging.getLogger(__name__)


@dataclass
class PipelineConfig:
    """Config of `kernelwright pipeline`: the knobs worth turning for a whole run."""

    workdir: str | None = field(default=None, metadata={"help": "Work folder. None: ./.kernelwright."})
    tracking_uri: str | None = field(default=None, metadata={"help": TRACKING_URI_HELP})
    base_model: str | None = field(default=None, metadata={"help": "Local HF checkpoint. None: the tiny model."})
    weighting: str = field(default="cuset", metadata={"help": "Loss weighting: plain, token, region or cuset."})
    max_steps: int = field(default=300, metadata={"help": "Training steps."})
    per_device_train_batch_size: int = field(default=2, metadata={"help": "Samples per micro-batch."})
    learning_rate: float = field(default=2e-3, metadata={"help": "Peak learning rate."})
    max_length: int = field(default=2048, metadata={"help": "Training sequence length cap, in tokens."})
    lora: bool = field(default=False, metadata={"help": "LoRA instead of full fine-tuning."})
    samples: int = field(default=1, metadata={"help": "Completions per held-out problem."})
    max_new_tokens: int = field(default=384, metadata={"help": "Generation budget per completion."})
    seed: int = field(default=0, metadata={"help": "Seed of training and sampling."})


@dataclass
class PipelineResult:
    run_id: str
    tracking_uri: str
    registered_model: str
    version: str | None
    wall_s: float
    evaluation: EvaluateResult

    @property
    def metrics(self) -> dict[str, float]:
        return self.evaluation.metrics


def run_pipeline(cfg: PipelineConfig, on_stage: Callable[[str], None] = lambda name: None) -> PipelineResult:
    """Run the three stages; `on_stage(name)` is called as each one starts (for progress output)."""
    check_base_model(cfg.base_model)  # before the MLflow store is touched
    with tracking_env(cfg.tracking_uri):
        return _run(cfg, on_stage)


def _run(cfg: PipelineConfig, on_stage: Callable[[str], None]) -> PipelineResult:
    start = time.perf_counter()
    workdir = resolve_workdir(cfg.workdir)
    setup_tracking(workdir)
    with stage_run("pipeline") as parent:
        mlflow.log_params(config_to_params(cfg, "pipeline."))
        on_stage("curate")
        with stage_run("curate"):
            data_dir = run_curate(CurateConfig(split="train",
                                                  workdir=str(workdir), base_model=cfg.base_model))
        on_stage("train")
        with stage_run("train"):
            trained = run_train(TrainConfig(
                data=str(data_dir), weighting=cfg.weighting, max_steps=cfg.max_steps,
                per_device_train_batch_size=cfg.per_device_train_batch_size, learning_rate=cfg.learning_rate,
                max_length=cfg.max_length, lora=cfg.lora, merge_lora=cfg.lora, seed=cfg.seed,
                save_steps=max(cfg.max_steps // 3, 1), workdir=str(workdir), base_model=cfg.base_model,
            ))
        on_stage("evaluate")
        with stage_run("evaluate"):
            registered = f"models:/{REGISTERED_MODEL}/{trained.registered_version}"
            evaluation = evaluate(EvaluateConfig(
                model=registered if trained.registered_version else str(trained.model_dir),
                samples=cfg.samples, max_new_tokens=cfg.max_new_tokens,
                seed=cfg.seed, workdir=str(workdir),
            ))
        wall = time.perf_counter() - start
        mlflow.log_metrics({"pipeline.wall_s": wall, "train.final_loss": trained.train_loss})
        if trained.registered_version:
            mlflow.set_tag("registered_version", trained.registered_version)
    return PipelineResult(run_id=parent.info.run_id, tracking_uri=tracking_uri(workdir),
                          registered_model=REGISTERED_MODEL, version=trained.registered_version,
                          wall_s=wall, evaluation=evaluation)
