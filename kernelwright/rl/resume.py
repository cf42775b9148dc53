"""Where an RL run's checkpoints are, and how a killed run resumes from them into its MLflow run.

The output folder holds the trainer's `checkpoint-<step>` folders and `RUN_ID_FILE`, the id of the
MLflow run logging to it. A rerun with `resume` on continues from `last_complete_checkpoint` into
`resumable_run_id`'s run; with `resume` off, an output folder that holds checkpoints is refused.
"""

from __future__ import annotations

import logging
from pathlib import Path

import mlflow

from kernelwright.checkpoints import RUN_ID_FILE, last_complete_checkpoint, store_has_run
from kernelwright.errors import UsageError
from kernelwright.rl.config import RLConfig
from kernelwright.workdir import resolve_workdir

log = logging.getLogger(__name__)


def out_dir(cfg: RLConfig) -> Path:
    """Checkpoints and final model: --out, else <workdir>/rl."""
    return Path(cfg.out) if cfg.out else resolve_workdir(cfg.workdir) / "rl"


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
    if run_id is None or store_has_run(run_id):
        return run_id
    log.warning("%s holds checkpoints of MLflow run %s, which the tracking store %s does not hold: the run resumes "
                "from the checkpoint, logged to a new MLflow run", out_dir(cfg), run_id, mlflow.get_tracking_uri())
    return None
