"""MLflow wiring: the `kernelwright` experiment, nested stage runs and the model registry.

Every experiment kernelwright creates is tagged `mlflow.experimentKind=custom_model_development`,
so MLflow 3's UI shows it as a model-training experiment (runs, metrics, models) rather than a
GenAI one (traces, evaluations). MLflow 3.17's UI decides that by its GenAI / Model training
switch, kept per browser and GenAI until changed; a link carrying `workflowType=machine_learning`
(`experiment_page_url`) opens the experiment as model training whatever the switch says.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import mlflow
from mlflow.entities import Experiment
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from sqlalchemy.exc import SQLAlchemyError

from kernelwright.code_state import tag_code_state
from kernelwright.config import config_yaml
from kernelwright.errors import UsageError
from kernelwright.store import Store
from kernelwright.workdir import artifact_root, redacted, sqlite_file

EXPERIMENT = "kernelwright"
REGISTERED_MODEL = "kernelwright-coder"
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"  # how MLflow 3's UI shows an experiment
MODEL_TRAINING = "custom_model_development"  # that tag's value for a model-training experiment
ML_WORKFLOW = "workflowType=machine_learning"  # the UI's GenAI / Model training switch, as a link sets it
CONFIG_ARTIFACT_DIR = "config"  # a run's settings as its command's --config file: config/<command>.yaml

log = logging.getLogger(__name__)
STORE_LOCK_TIMEOUT_S = 300.0  # how long a command waits for another one to finish creating the same SQLite store
MLFLOW_SET_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_ID")  # set by mlflow.set_tracking_uri / set_experiment


def setup_tracking(store: Store | Path, experiment: str = EXPERIMENT) -> str:
    """Point MLflow at `store` (a work folder alone: its store as `Store.resolve` finds it) and select
    the experiment.

    Returns the experiment id; a store MLflow cannot open is a UsageError. A new experiment keeps its
    artifacts in `<workdir>/mlartifacts` when tracking is local; a remote server keeps its own artifact root.
    """
    if not isinstance(store, Store):
        store = Store.resolve(store)
    from alembic.util.exc import CommandError  # MLflow's SQL store migrates its schema through alembic

    uri = store.tracking_uri
    mlflow.set_tracking_uri(uri)
    with _store_lock(uri):  # commands started together on a new store: one creates it, the others wait
        try:
            client = MlflowClient(uri)
            exp = client.get_experiment_by_name(experiment)
        except (MlflowException, SQLAlchemyError, CommandError, OSError) as exc:  # an unknown scheme, a refused
            # file store, no database, a newer schema, a folder MLflow cannot make for a new store
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            raise UsageError(f"MLflow tracking store {redacted(uri)} cannot be used: {redacted(first)}") from None
        location = artifact_root(store.workdir).as_uri() if store.local else None
        exp_id = _marked(client, exp) if exp else _created(client, experiment, location)
    mlflow.set_experiment(experiment_id=exp_id)
    return exp_id


@contextmanager
def _store_lock(uri: str) -> Iterator[None]:
    """Held while a command opens a SQLite store (creating or migrating its tables) and finds or creates
    its experiment: MLflow does neither atomically, so two commands started together on a new store
    fail with "table ... already exists" or an alembic version clash. Other stores: nothing held."""
    path = sqlite_file(uri)
    if path is None:
        yield
        return
    from filelock import FileLock, Timeout

    lock = FileLock(f"{path}.lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # as MLflow makes it for a new store
        lock.acquire(timeout=STORE_LOCK_TIMEOUT_S)
    except Timeout:
        raise UsageError(f"MLflow tracking store {redacted(uri)}: another command held {path}.lock for "
                         f"{STORE_LOCK_TIMEOUT_S:.0f} s while opening it") from None
    except OSError as exc:  # a folder this user may read but not write: opened as before, unlocked, and
        # where MLflow cannot open it either, its own error names the store
        log.debug("no lock beside %s (%s): the store is opened without it", path, exc)
        yield
        return
    try:
        yield
    finally:
        lock.release()


@contextmanager
def tracking_session(store: Store, experiment: str = EXPERIMENT) -> Iterator[str]:
    """`setup_tracking(store)` for one command; the variables MLflow sets in the environment while
    it tracks (MLFLOW_TRACKING_URI, MLFLOW_EXPERIMENT_ID) are put back afterwards."""
    saved = {name: os.environ.get(name) for name in MLFLOW_SET_ENV}
    try:
        yield setup_tracking(store, experiment)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def ensure_experiment(client: MlflowClient, name: str, artifact_location: str | None = None) -> str:
    """The id of experiment `name`, created if missing, marked as a model-training experiment (one
    that already says what kind it is keeps its kind)."""
    exp = client.get_experiment_by_name(name)
    return _marked(client, exp) if exp else _created(client, name, artifact_location)


def _created(client: MlflowClient, name: str, artifact_location: str | None) -> str:
    return client.create_experiment(name, artifact_location=artifact_location,
                                    tags={EXPERIMENT_KIND_TAG: MODEL_TRAINING})


def _marked(client: MlflowClient, exp: Experiment) -> str:
    if EXPERIMENT_KIND_TAG not in exp.tags:  # made before kernelwright tagged its experiments
        try:
            client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, MODEL_TRAINING)
        except MlflowException as exc:  # a store that lets this user log runs but not tag the experiment
            log.warning("could not mark experiment %s as model training: %s", exp.name, exc.error_code)
    return str(exp.experiment_id)


def experiment_page_url(server: str, experiment_id: str | None) -> str:
    """The MLflow UI page of the experiment's runs (of the experiment list when None), opened as
    model training whatever the browser's GenAI / Model training switch says."""
    page = f"experiments/{experiment_id}/runs" if experiment_id else "experiments"
    return f"{server.rstrip('/')}/#/{page}?{ML_WORKFLOW}"


def ui_start_page(server: str, store_uri: str, experiment: str = EXPERIMENT) -> str:
    """`experiment_page_url` of `experiment` in the store behind `server`; the experiment list when
    the store does not hold it (yet) or cannot be read here."""
    try:
        exp = MlflowClient(store_uri).get_experiment_by_name(experiment)
    except (MlflowException, SQLAlchemyError):
        exp = None
    return experiment_page_url(server, exp.experiment_id if exp else None)


@contextmanager
def stage_run(name: str, tags: dict[str, str] | None = None) -> Iterator[mlflow.ActiveRun]:
    """Start a run named for the stage, nested under the active run if there is one; a top-level run gets the
    code's state (code_state.py: version, commit, uncommitted changes)."""
    nested = mlflow.active_run() is not None
    with mlflow.start_run(run_name=name, nested=nested, tags={"kernelwright.stage": name, **(tags or {})}) as run:
        if not nested:
            tag_code_state()
        yield run


def config_artifact(command: str) -> str:
    """Where a run of `kernelwright <command>` keeps its settings: config/<command>.yaml ("base-model pretrain":
    config/base-model-pretrain.yaml)."""
    return f"{CONFIG_ARTIFACT_DIR}/{command.replace(' ', '-')}.yaml"


def log_config(cfg: object, command: str) -> None:
    """Write the active run's settings as the `--config` file of `kernelwright <command>`, so that
    `mlflow artifacts download` and `kernelwright <command> --config` run it again (the code: its `kw.code.*`
    tags). A run resumed keeps the file it started with, as it keeps its params."""
    run = mlflow.active_run()
    if run is None:
        return
    path = config_artifact(command)
    if any(a.path == path for a in MlflowClient().list_artifacts(run.info.run_id, CONFIG_ARTIFACT_DIR)):
        return
    mlflow.log_text(config_yaml(cfg, command), path)


def log_curated_dataset(parquet: Path, context: str) -> None:
    """Log curated Parquet as an MLflow dataset (digest over the sample ids and weights)."""
    import polars as pl

    frame = pl.read_parquet(parquet, columns=["id", "task_id", "category", "sample_weight"])
    dataset = mlflow.data.from_polars(frame, source=str(parquet), name="curated")  # type: ignore[attr-defined]
    mlflow.log_input(dataset, context=context)


def set_alias(version: str, alias: str, name: str = REGISTERED_MODEL) -> None:
    MlflowClient().set_registered_model_alias(name, alias, version)
