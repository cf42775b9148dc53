"""Where kernelwright keeps its state: the work directory and the MLflow store inside it.

Defaults (nothing given): `./.kernelwright/` holds the tiny base model, curated data, training
checkpoints, `mlflow.db` (tracking + registry, SQLite) and `mlartifacts/`. A stage's
`--tracking-uri`, else the environment variable `MLFLOW_TRACKING_URI`, points tracking elsewhere;
`KERNELWRIGHT_WORKDIR` moves the folder.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DEFAULT_WORKDIR = ".kernelwright"
TRACKING_ENV = "MLFLOW_TRACKING_URI"
# the help text of every stage's `tracking_uri` field
TRACKING_URI_HELP = (
    "MLflow tracking + registry store of this command: sqlite:///FILE.db, postgresql://USER@HOST/DB, "
    "http(s)://SERVER or a folder (MLflow's file store, with MLFLOW_ALLOW_FILE_STORE=true). None: "
    "MLFLOW_TRACKING_URI when set, else the work folder's local store (sqlite:///<workdir>/mlflow.db).")


def resolve_workdir(workdir: str | os.PathLike[str] | None = None) -> Path:
    path = Path(workdir or os.environ.get("KERNELWRIGHT_WORKDIR") or DEFAULT_WORKDIR).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def tracking_uri(workdir: Path, override: str | None = None) -> str:
    """The store in use: `override` (a stage's --tracking-uri), else MLFLOW_TRACKING_URI, else the work folder's."""
    return override or os.environ.get(TRACKING_ENV) or f"sqlite:///{workdir / 'mlflow.db'}"


def sqlite_file(uri: str) -> Path | None:
    """The database file of a SQLite store URI (`sqlite:///rel/path`, `sqlite:////abs/path`); None for
    another store or an in-memory one."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri.removeprefix("sqlite:///").split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


@contextmanager
def tracking_env(uri: str | None) -> Iterator[None]:
    """MLFLOW_TRACKING_URI set to `uri` for the duration, so that everything the command does (and the
    processes it starts) tracks there; nothing changes when `uri` is None or empty."""
    if not uri:
        yield
        return
    before = os.environ.get(TRACKING_ENV)
    os.environ[TRACKING_ENV] = uri
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(TRACKING_ENV, None)
        else:
            os.environ[TRACKING_ENV] = before


def redacted(uri: str) -> str:
    """The URI without its password, for messages and logged settings."""
    return re.sub(r"://([^:/@]+):[^@/]*@", r"://\1:***@", uri)


def artifact_root(workdir: Path) -> Path:
    return workdir / "mlartifacts"


def base_model_dir(workdir: Path) -> Path:
    return workdir / "base-model"
