"""The retrain's curate and train steps, each keyed by its inputs' digests so a rerun resumes.

    <workdir>/retrain/curated-<corpus+base digest>/   curated data; `retrain.json` marks it complete
    <workdir>/retrain/train-<watermark>/               checkpoints, final model, the train run's id

A curated folder without its marker is curated again (curation's p_t chunks are cached, so a killed
curation picks up where it stopped); a train folder resumes from its last complete checkpoint into
the same MLflow run; a train folder whose run registered a version is not trained again.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import mlflow
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from kernelwright import atomic, job_config
from kernelwright.checkpoints import RUN_ID_FILE
from kernelwright.curation.config import CurateConfig
from kernelwright.curation.stage import run_curate
from kernelwright.retrain.config import RetrainConfig
from kernelwright.retrain.watermark import Watermark
from kernelwright.tracking import log_curated_dataset, stage_run
from kernelwright.training.config import TrainConfig
from kernelwright.training.resume import resumable_run_id
from kernelwright.training.stage import run_train

log = logging.getLogger(__name__)
DONE_FILE = "retrain.json"
CURATE_PATHS = ("input", "out", "workdir", "tracking_uri", "p_cache", "base_model", "workers", "decontaminate_against")
TRAIN_PATHS = ("data", "output_dir", "workdir", "tracking_uri", "base_model", "system_metrics", "register", "alias",
               "logging_steps", "save_steps")


def retrain_root(workdir: Path) -> Path:
    return workdir / "retrain"


def curate_config(cfg: RetrainConfig, workdir: Path, out: Path | None = None) -> CurateConfig:
    return job_config.curate_config(cfg, workdir, input=list(cfg.input), map=list(cfg.map), nvrtc=cfg.nvrtc,
                                    out=str(out) if out else None)


def train_config(cfg: RetrainConfig, workdir: Path, data: Path | None = None, out: Path | None = None) -> TrainConfig:
    return job_config.train_config(cfg, workdir, data, output_dir=str(out) if out else None,
                                   registered_model=cfg.registered_model, alias="candidate")


def settings_of(config: Any, paths: tuple[str, ...]) -> dict[str, Any]:
    """A config's fields that change the result (paths and logging left out), for the watermark."""
    return {k: v for k, v in asdict(config).items() if k not in paths}


def curate_step(cfg: RetrainConfig, workdir: Path, mark: Watermark) -> Path:
    """Curated data for this corpus and base model: reused when complete, else curated in a child run."""
    out = retrain_root(workdir) / f"curated-{mark.curate_key}"
    parent = mlflow.active_run()
    parent_id = parent.info.run_id if parent else None
    if (out / DONE_FILE).is_file() and (out / "data.parquet").is_file():
        if json.loads((out / DONE_FILE).read_text()).get("parent_run_id") == parent_id:
            return out  # curated by this very run before it was killed: its child run is there already
        with stage_run("curate", tags={"kw.retrain.reused": str(out)}):
            log_curated_dataset(out / "data.parquet", context="curate")
        return out
    with stage_run("curate"):
        run_curate(curate_config(cfg, workdir, out))
    atomic.write_json(out / DONE_FILE, {"corpus": mark.corpus, "base_model": mark.base_model,
                                        "parent_run_id": parent_id})
    return out


def trained_version(tcfg: TrainConfig) -> str | None:
    """The version a finished train into this folder registered (its run tagged it), else None."""
    out = Path(tcfg.output_dir or "")
    run_file = out / RUN_ID_FILE
    if not (out / "final").is_dir() or not run_file.is_file():
        return None
    try:
        run = MlflowClient().get_run(run_file.read_text().strip())
    except MlflowException:
        return None
    return run.data.tags.get("kw.registered_version") if run.info.status == "FINISHED" else None


def train_step(cfg: RetrainConfig, workdir: Path, mark: Watermark, data: Path) -> str:
    """Train (or resume training) into the watermark's folder in a child run; the registered version."""
    tcfg = train_config(cfg, workdir, data, retrain_root(workdir) / f"train-{mark.key}")
    done = trained_version(tcfg)
    if done is not None:
        log.info("training into %s already finished: version %s", tcfg.output_dir, done)
        return done
    run_id = resumable_run_id(tcfg)
    tags = None if run_id else {"kernelwright.stage": "train"}
    with mlflow.start_run(run_id=run_id, run_name=None if run_id else "train", nested=True, tags=tags):
        result = run_train(tcfg)
    if result.registered_version is None:
        raise RuntimeError(f"training into {tcfg.output_dir} registered no version")
    return result.registered_version


def prune_checkpoints(workdir: Path, keep: int) -> list[Path]:
    """In every finished train folder (it has `final/`), delete all but the newest `keep` checkpoints."""
    removed: list[Path] = []
    for folder in sorted(retrain_root(workdir).glob("train-*")):
        if not (folder / "final").is_dir():
            continue  # still training: its checkpoints are what a rerun resumes from
        steps = sorted((int(p.name.rsplit("-", 1)[1]), p) for p in folder.glob("checkpoint-*")
                       if p.name.rsplit("-", 1)[1].isdigit())
        for _, path in steps[: max(len(steps) - keep, 0)]:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    if removed:
        log.info("pruned %d checkpoints (keeping the newest %d and the final model)", len(removed), keep)
    return removed

