"""Where kernelwright keeps its state: the work directory and the MLflow store inside it.

Defaults (nothing given): `./.kernelwright/` holds the tiny base model, curated data, training
checkpoints, `mlflow.db` (tracking + registry, SQLite) and `mlartifacts/`. The environment
variable `MLFLOW_TRACKING_URI` points tracking elsewhere; `KERNELWRIGHT_WORKDIR` moves the folder.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_WORKDIR = ".kernelwright"


def resolve_workdir(workdir: str | os.PathLike[str] | None = None) -> Path:
    path = Path(workdir or os.environ.get("KERNELWRIGHT_WORKDIR") or DEFAULT_WORKDIR).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def tracking_uri(workdir: Path) -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{workdir / 'mlflow.db'}"


def artifact_root(workdir: Path) -> Path:
    return workdir / "mlartifacts"


def base_model_dir(workdir: Path) -> Path:
    return workdir / "base-model"
