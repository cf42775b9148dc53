"""Where a train run's checkpoints are, and how a killed run resumes from them into its MLflow run.

The output folder (one per weighting under an ablation) holds the checkpoints and `RUN_ID_FILE`,
the id of the MLflow run logging to it; `RunIdInCheckpoints` writes that id into every checkpoint
too. A rerun resumes from `last_complete_checkpoint` into `resumable_run_id`'s run.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import mlflow
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import RESOURCE_DOES_NOT_EXIST, ErrorCode
from mlflow.tracking import MlflowClient
from transformers import TrainerCallback

from kernelwright import atomic
from kernelwright.training.config import TrainConfig
from kernelwright.workdir import resolve_workdir

log = logging.getLogger(__name__)
RUN_ID_FILE = "mlflow_run_id.txt"


def output_dir_of(cfg: TrainConfig) -> Path:
    """Checkpoints and final model: --output-dir, else <workdir>/train."""
    return Path(cfg.output_dir) if cfg.output_dir else resolve_workdir(cfg.workdir) / "train"


def ablation_configs(cfg: TrainConfig) -> list[TrainConfig]:
    """One config per listed weighting: same data, seed and steps, output in <output_dir>/<weighting>; only the
    weighting equal to `cfg.weighting` keeps the alias (`candidate`)."""
    out = output_dir_of(cfg)
    return [replace(cfg, weighting=mode, ablation=None, output_dir=str(out / mode),
                    alias=cfg.alias if mode == cfg.weighting else None) for mode in cfg.ablation_modes]


def last_complete_checkpoint(output_dir: Path) -> str | None:
    """The newest checkpoint whose save finished (the Trainer writes trainer_state.json last).

    A run killed while writing a checkpoint leaves a partial folder; resuming skips it.
    """
    found = [(int(p.name.rsplit("-", 1)[1]), p) for p in output_dir.glob("checkpoint-*")
             if p.name.rsplit("-", 1)[1].isdigit() and (p / "trainer_state.json").is_file()]
    return str(max(found)[1]) if found else None


class RunIdInCheckpoints(TrainerCallback):
    """Writes the MLflow run id into every checkpoint folder (a copied checkpoint still names its run)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and folder.is_dir():
            atomic.write_text(folder / RUN_ID_FILE, self.run_id)


def resume_run_id(cfg: TrainConfig) -> str | None:
    """The MLflow run a previous, interrupted `train` into the same output folder was logging to."""
    output_dir = output_dir_of(cfg)
    f = output_dir / RUN_ID_FILE
    if not f.is_file():
        return None
    children = [output_dir_of(c) for c in ablation_configs(cfg)] if cfg.ablation else [output_dir]
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
                output_dir_of(cfg), run_id, mlflow.get_tracking_uri())
    return None


def _store_has_run(run_id: str) -> bool:
    """Whether the current tracking store holds run `run_id`, not deleted (a deleted run cannot be resumed)."""
    try:
        return MlflowClient().get_run(run_id).info.lifecycle_stage == "active"
    except MlflowException as exc:
        if exc.error_code == ErrorCode.Name(RESOURCE_DOES_NOT_EXIST):
            return False
        raise
