"""Where a train run's checkpoints are, and how a killed run resumes from them into its MLflow run.

The output folder (one per weighting under an ablation) holds the checkpoints and `RUN_ID_FILE`,
the id of the MLflow run logging to it; `RunIdInCheckpoints` writes that id into every checkpoint
too. A rerun resumes from `last_complete_checkpoint` into `resumable_run_id`'s run, and only on the same
data: `SETTINGS_FILE` records the curated data's digest the run was begun with, and
`changed_since_begun` names a difference (a pipeline run again in its work folder after curation
changed would otherwise resume the old run's last checkpoint and register it as new). Settings are
checked against the MLflow run's params (`changed_settings`); a checkpoint resumed into a new run
may go on with more steps.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import mlflow

from kernelwright import atomic
from kernelwright.checkpoints import RUN_ID_FILE, last_complete_checkpoint, store_has_run
from kernelwright.training.config import TrainConfig
from kernelwright.workdir import resolve_workdir

log = logging.getLogger(__name__)
SETTINGS_FILE = "kw_begun_with.json"  # beside RUN_ID_FILE: {setting: value} of the run the checkpoints belong to


def output_dir_of(cfg: TrainConfig) -> Path:
    """Checkpoints and final model: --output-dir, else <workdir>/train."""
    return Path(cfg.output_dir) if cfg.output_dir else resolve_workdir(cfg.workdir) / "train"


def ablation_configs(cfg: TrainConfig) -> list[TrainConfig]:
    """One config per listed weighting: same data, seed and steps, output in <output_dir>/<weighting>; only the
    weighting equal to `cfg.weighting` keeps the alias (`candidate`)."""
    out = output_dir_of(cfg)
    return [replace(cfg, weighting=mode, ablation=None, output_dir=str(out / mode),
                    alias=cfg.alias if mode == cfg.weighting else None) for mode in cfg.ablation_modes]


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
    if run_id is None or store_has_run(run_id):
        return run_id
    log.warning("%s holds checkpoints of MLflow run %s, which the tracking store %s does not hold (was "
                "MLFLOW_TRACKING_URI changed?): training resumes from the checkpoint, logged to a new run",
                output_dir_of(cfg), run_id, mlflow.get_tracking_uri())
    return None


def changed_settings(run_id: str, params: dict[str, str]) -> list[str]:
    """`key: logged -> now` for each of `params` that the run already logged with another value (MLflow keeps a
    run's params fixed: a resumed run must be trained as it was begun)."""
    logged = mlflow.MlflowClient().get_run(run_id).data.params
    return [f"{k}: {logged[k]} -> {v}" for k, v in params.items() if k in logged and logged[k] != v]


def changed_since_begun(output_dir: Path, settings: dict[str, str]) -> list[str]:
    """`key: then -> now` for each setting (the data's digest among them) that the run whose complete
    checkpoints are in `output_dir` was begun with another value of; [] with no checkpoint, or
    checkpoints of a run that recorded nothing (an older kernelwright)."""
    if last_complete_checkpoint(output_dir) is None:
        return []
    try:
        then = json.loads((output_dir / SETTINGS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(then, dict):
        return []
    return [f"{k}: {then.get(k)} -> {settings.get(k)}" for k in sorted(then.keys() | settings.keys())
            if then.get(k) != settings.get(k)]


def record_begun_with(output_dir: Path, settings: dict[str, str]) -> None:
    atomic.write_json(output_dir / SETTINGS_FILE, settings)
