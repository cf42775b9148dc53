"""Where an RL run's checkpoints are, and how a killed run resumes from them into its MLflow run.

The output folder holds the trainer's `checkpoint-<step>` folders and `RUN_ID_FILE`, the id of the
MLflow run logging to it. A rerun with `resume` on continues from `last_complete_checkpoint` into
`resumable_run_id`'s run; with `resume` off, an output folder that holds checkpoints is refused.
"""

from __future__ import annotations

import logging
from pathlib import Path

import mlflow
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import RESOURCE_DOES_NOT_EXIST, ErrorCode
from mlflow.tracking import MlflowClient
from transformers import TrainerCallback

from kernelwright import atomic
from kernelwright.errors import UsageError
from kernelwright.rl.config import RLConfig
from kernelwright.workdir import resolve_workdir

log = logging.getLogger(__name__)
RUN_ID_FILE = "mlflow_run_id.txt"


def out_dir(cfg: RLConfig) -> Path:
    """Checkpoints and final model: --out, else <workdir>/rl."""
    return Path(cfg.out) if cfg.out else resolve_workdir(cfg.workdir) / "rl"


def last_complete_checkpoint(folder: Path) -> str | None:
    """The newest checkpoint whose save finished (the trainer writes trainer_state.json last); a folder left
    half-written by a kill is skipped."""
    found = [(int(p.name.rsplit("-", 1)[1]), p) for p in folder.glob("checkpoint-*")
             if p.name.rsplit("-", 1)[1].isdigit() and (p / "trainer_state.json").is_file()]
    return str(max(found)[1]) if found else None


def checkpoint_to_resume(cfg: RLConfig) -> str | None:
    """The checkpoint this run continues from: the last complete one when `resume` is on; None for a fresh start.
    With `resume` off, an output folder holding checkpoints is a UsageError (they would be mixed with new ones)."""
    last = last_complete_checkpoint(out_dir(cfg))
    if last is not None and not cfg.resume:
        raise UsageError(f"{out_dir(cfg)} holds checkpoints of an earlier run ({Path(last).name}): resume it "
                         "(--resume true), or give another --out")
    return last


def resume_run_id(cfg: RLConfig) -> str | None:
    """The MLflow run an interrupted run into the same output folder was logging to (None: start a new run)."""
    f = out_dir(cfg) / RUN_ID_FILE
    if not cfg.resume or not f.is_file() or last_complete_checkpoint(out_dir(cfg)) is None:
        return None
    return f.read_text().strip() or None


def resumable_run_id(cfg: RLConfig) -> str | None:
    """`resume_run_id`, if the current tracking store holds that run (active); else None, with a warning: training
    still resumes from the checkpoint, logged to a new run."""
    run_id = resume_run_id(cfg)
    if run_id is None or _store_has_run(run_id):
        return run_id
    log.warning("%s holds checkpoints of MLflow run %s, which the tracking store %s does not hold: the run resumes "
                "from the checkpoint, logged to a new MLflow run", out_dir(cfg), run_id, mlflow.get_tracking_uri())
    return None


def _store_has_run(run_id: str) -> bool:
    try:
        return MlflowClient().get_run(run_id).info.lifecycle_stage == "active"
    except MlflowException as exc:
        if exc.error_code == ErrorCode.Name(RESOURCE_DOES_NOT_EXIST):
            return False
        raise


class RunIdInCheckpoints(TrainerCallback):
    """Writes the MLflow run id into every checkpoint folder (a copied checkpoint still names its run)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def on_save(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and folder.is_dir():
            atomic.write_text(folder / RUN_ID_FILE, self.run_id)
