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
from dataclasses import dataclass
from pathlib import Path

import mlflow

from kernelwright.base_model.choose import check_base_model
from kernelwright.base_model.pretrain import read_meta
from kernelwright.config import config_to_params
from kernelwright.curation.stage import run_curate
from kernelwright.evaluation.stage import EvaluateResult, run_evaluate
from kernelwright.job_config import PipelineConfig, curate_config, evaluate_config, train_config
from kernelwright.store import Store
from kernelwright.tracking import REGISTERED_MODEL, stage_run, tracking_session
from kernelwright.training.stage import run_train

log = logging.getLogger(__name__)


@dataclass
class PipelineResult:
    run_id: str
    tracking_uri: str
    registered_model: str
    version: str | None
    wall_s: float
    evaluation: EvaluateResult
    base_heldout_bits_per_char: float | None = None  # the base's, as its pretraining measured it; None: unknown

    @property
    def metrics(self) -> dict[str, float]:
        return self.evaluation.metrics


def run_pipeline(cfg: PipelineConfig, on_stage: Callable[[str], None] = lambda name: None) -> PipelineResult:
    """Run the three stages; `on_stage(name)` is called as each one starts (for progress output)."""
    check_base_model(cfg.base_model)  # before the MLflow store is touched
    store = Store.of(cfg)
    with tracking_session(store):
        return _run(cfg, store, on_stage)


def _run(cfg: PipelineConfig, store: Store, on_stage: Callable[[str], None]) -> PipelineResult:
    start = time.perf_counter()
    workdir = store.workdir
    with stage_run("pipeline") as parent:
        mlflow.log_params(config_to_params(cfg, "pipeline."))
        on_stage("curate")
        with stage_run("curate"):
            data_dir = run_curate(curate_config(cfg, workdir))
        on_stage("train")
        with stage_run("train"):
            trained = run_train(train_config(cfg, workdir, data_dir))
        on_stage("evaluate")
        with stage_run("evaluate"):
            registered = f"models:/{REGISTERED_MODEL}/{trained.registered_version}"
            evaluation = run_evaluate(evaluate_config(
                cfg, workdir, registered if trained.registered_version else str(trained.model_dir)))
        wall = time.perf_counter() - start
        base_bpc = base_heldout_figure(trained.base_dir)
        learned = {"pipeline.base_heldout_bits_per_char": base_bpc} if base_bpc is not None else {}
        mlflow.log_metrics({"pipeline.wall_s": wall, "train.final_loss": trained.train_loss, **learned})
        if trained.registered_version:
            mlflow.set_tag("registered_version", trained.registered_version)
    return PipelineResult(run_id=parent.info.run_id, tracking_uri=store.tracking_uri,
                          registered_model=REGISTERED_MODEL, version=trained.registered_version,
                          wall_s=wall, evaluation=evaluation, base_heldout_bits_per_char=base_bpc)


def base_heldout_figure(base: Path | None) -> float | None:
    """The seed held-out answers' bits per character under the base, from the record its pretraining left
    (`base-model pretrain` measures it); None for a base without one (a user's checkpoint)."""
    meta = read_meta(base) if base is not None else None
    heldout = (meta or {}).get("heldout")
    value = heldout.get("bits_per_char") if isinstance(heldout, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
