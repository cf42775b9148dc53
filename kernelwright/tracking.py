"""MLflow wiring: the `kernelwright` experiment, nested stage runs and the model registry."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import mlflow
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from sqlalchemy.exc import SQLAlchemyError

from kernelwright.errors import UsageError
from kernelwright.workdir import artifact_root, redacted, tracking_uri

EXPERIMENT = "kernelwright"
REGISTERED_MODEL = "kernelwright-coder"

log = logging.getLogger(__name__)


def setup_tracking(workdir: Path, experiment: str = EXPERIMENT) -> str:
    """Point MLflow at the work directory's store (or MLFLOW_TRACKING_URI) and select the experiment.

    Returns the experiment id; a store MLflow cannot open is a UsageError. A new experiment keeps its
    artifacts in `<workdir>/mlartifacts` when tracking is local; a remote server keeps its own artifact root.
    """
    uri = tracking_uri(workdir)
    mlflow.set_tracking_uri(uri)
    try:
        client = MlflowClient(uri)
        exp = client.get_experiment_by_name(experiment)
    except (MlflowException, SQLAlchemyError) as exc:  # an unknown scheme, a refused file store, no database
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise UsageError(f"MLflow tracking store {redacted(uri)} cannot be used: {redacted(first)}") from None
    if exp is None:
        location = artifact_root(workdir).as_uri() if uri.startswith("sqlite:") else None
        exp_id = client.create_experiment(experiment, artifact_location=location)
    else:
        exp_id = exp.experiment_id
    mlflow.set_experiment(experiment_id=exp_id)
    return exp_id


@contextmanager
def stage_run(name: str, tags: dict[str, str] | None = None) -> Iterator[mlflow.ActiveRun]:
    """Start a run named for the stage, nested under the active run if there is one."""
    nested = mlflow.active_run() is not None
    with mlflow.start_run(run_name=name, nested=nested, tags={"kernelwright.stage": name, **(tags or {})}) as run:
        yield run


def log_curated_dataset(parquet: Path, context: str) -> None:
    """Log curated Parquet as an MLflow dataset (digest over the sample ids and weights)."""
    import polars as pl

    frame = pl.read_parquet(parquet, columns=["id", "task_id", "category", "sample_weight"])
    dataset = mlflow.data.from_polars(frame, source=str(parquet), name="curated")  # type: ignore[attr-defined]
    mlflow.log_input(dataset, context=context)


def set_alias(version: str, alias: str, name: str = REGISTERED_MODEL) -> None:
    MlflowClient().set_registered_model_alias(name, alias, version)
