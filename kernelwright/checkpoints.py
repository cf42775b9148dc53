"""Trainer checkpoints shared by every training stage (`train`, `rl`): which one a killed run resumes
from, and the MLflow run it was logging to.

An output folder holds the trainer's `checkpoint-<step>` folders and `RUN_ID_FILE`, the id of the
MLflow run logging to it; `RunIdInCheckpoints` writes that id into every checkpoint too (a copied
checkpoint still names its run). `TimeLimit` ends a run after a wall-clock budget, with a checkpoint to
resume from.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import RESOURCE_DOES_NOT_EXIST, ErrorCode
from mlflow.tracking import MlflowClient
from transformers import TrainerCallback

from kernelwright import atomic

RUN_ID_FILE = "mlflow_run_id.txt"


def last_complete_checkpoint(folder: Path) -> str | None:
    """The newest checkpoint whose save finished (the trainer writes trainer_state.json last); a folder left
    half-written by a kill is skipped."""
    found = [(int(p.name.rsplit("-", 1)[1]), p) for p in folder.glob("checkpoint-*")
             if p.name.rsplit("-", 1)[1].isdigit() and (p / "trainer_state.json").is_file()]
    return str(max(found)[1]) if found else None


def store_has_run(run_id: str) -> bool:
    """Whether the current tracking store holds run `run_id`, not deleted (a deleted run cannot be resumed)."""
    try:
        return MlflowClient().get_run(run_id).info.lifecycle_stage == "active"
    except MlflowException as exc:
        if exc.error_code == ErrorCode.Name(RESOURCE_DOES_NOT_EXIST):
            return False
        raise


class RunIdInCheckpoints(TrainerCallback):
    """Writes the MLflow run id into every checkpoint folder."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def on_save(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and folder.is_dir():
            atomic.write_text(folder / RUN_ID_FILE, self.run_id)


class TimeLimit(TrainerCallback):
    """Stops training at the end of the first step that ends `seconds` or more after training began in this
    process, and asks for a checkpoint there, so a later run resumes from that step. `stopped_at_step` is that
    step (None while the budget holds); 0 seconds: no limit."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.clock = clock
        self.started: float | None = None
        self.stopped_at_step: int | None = None

    def on_train_begin(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        self.started = self.clock()

    def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        if self.seconds <= 0 or self.started is None or self.clock() - self.started < self.seconds:
            return control
        if state.global_step < state.max_steps:  # the last step stops and saves anyway
            control.should_training_stop = True
            control.should_save = True
            self.stopped_at_step = state.global_step
        return control
