"""`--tracking-uri` on every stage: the run lands in the store it names, never in the work folder's default one."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import shutil
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from kernelwright.base_model.config import REGISTERED_BASE, PretrainConfig
from kernelwright.cli import main
from kernelwright.curation.config import CurateConfig
from kernelwright.errors import UsageError
from kernelwright.evaluation.config import EvaluateConfig
from kernelwright.pipeline import PipelineConfig
from kernelwright.retrain.config import PromoteConfig, RetrainConfig, ScheduleConfig
from kernelwright.retrain.schedule import retrain_argv, run_retrain_job
from kernelwright.serving.config import ServeConfig
from kernelwright.tracking import EXPERIMENT
from kernelwright.training.config import TrainConfig
from kernelwright.workdir import TRACKING_URI_HELP, sqlite_file, tracking_env
from tests.retrain._pg import scratch_database

FIXTURES = Path(__file__).parent / "fixtures" / "verify"
CONFIGS = [CurateConfig, TrainConfig, EvaluateConfig, PipelineConfig, PretrainConfig, ServeConfig, PromoteConfig,
           RetrainConfig, ScheduleConfig]
COMMANDS = [["curate"], ["train"], ["evaluate"], ["pipeline"], ["base-model", "pretrain"], ["serve"], ["promote"],
            ["retrain"], ["schedule"]]


@pytest.fixture(autouse=True)
def _no_tracking_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def _runs(uri: str, stage: str) -> list:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    if exp is None:
        return []
    return client.search_runs([exp.experiment_id], filter_string=f"tags.`kernelwright.stage` = '{stage}'")


def _evaluate_args(tmp_path: Path) -> list[str]:
    """`evaluate --generations` of one honest candidate (static checks and NVRTC: any machine)."""
    (tmp_path / "suite" / "level1").mkdir(parents=True)
    shutil.copy(FIXTURES / "problems" / "affine.py", tmp_path / "suite" / "level1" / "affine.py")
    (tmp_path / "gen" / "level1" / "affine").mkdir(parents=True)
    shutil.copy(FIXTURES / "candidates" / "honest_affine.py", tmp_path / "gen" / "level1" / "affine" / "sample_0.py")
    return ["evaluate", "--suite", str(tmp_path / "suite"), "--generations", str(tmp_path / "gen"),
            "--workdir", str(tmp_path / "kw"), "--gate", "false"]


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_stage_config_has_the_field(cls: type) -> None:
    (f,) = [f for f in dataclasses.fields(cls) if f.name == "tracking_uri"]
    assert f.default is None and f.metadata["help"] == TRACKING_URI_HELP
    assert "work folder's local store" in TRACKING_URI_HELP


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a))
def test_every_stage_takes_the_flag(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([*argv, "--help"])
    assert done.value.code == 0 and "--tracking-uri" in capsys.readouterr().out


def test_evaluate_logs_to_the_named_sqlite_store_only(tmp_path: Path) -> None:
    other = f"sqlite:///{tmp_path / 'elsewhere' / 'other.db'}"
    (tmp_path / "elsewhere").mkdir()
    assert main([*_evaluate_args(tmp_path), "--tracking-uri", other]) == 0
    (run,) = _runs(other, "evaluate")
    assert run.data.params["evaluate.tracking_uri"] == other
    assert not (tmp_path / "kw" / "mlflow.db").exists()  # the default store was never opened
    assert "MLFLOW_TRACKING_URI" not in os.environ  # put back after the command


def test_a_postgresql_store(tmp_path: Path) -> None:
    with scratch_database() as uri:
        assert main([*_evaluate_args(tmp_path), "--tracking-uri", uri]) == 0
        assert len(_runs(uri, "evaluate")) == 1
    assert not (tmp_path / "kw" / "mlflow.db").exists()


def test_a_store_mlflow_cannot_open_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*_evaluate_args(tmp_path), "--tracking-uri", "nosuchscheme://x"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "nosuchscheme://x cannot be used" in err


def test_base_model_pretrain_registers_in_the_named_store(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    for name in ("textwrap.py", "colorsys.py", "bisect.py"):
        shutil.copy(Path(sysconfig.get_paths()["stdlib"]) / name, code / name)
    other = f"sqlite:///{tmp_path / 'other.db'}"
    assert main(["base-model", "pretrain", "--size", "micro", "--source", str(code), "--max-steps", "2",
                 "--warmup-steps", "1", "--workdir", str(tmp_path / "kw"), "--tracking-uri", other]) == 0
    (run,) = _runs(other, "base-model")
    assert [v.run_id for v in MlflowClient(other).search_model_versions(f"name='{REGISTERED_BASE}'")] == [
        run.info.run_id]
    assert not (tmp_path / "kw" / "mlflow.db").exists()


def test_curate_and_train_open_the_named_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stages' work is stubbed: what is checked is where their runs go."""
    import mlflow

    from kernelwright.curation import stage as curate_stage
    from kernelwright.training import stage as train_stage

    other = f"sqlite:///{tmp_path / 'other.db'}"
    monkeypatch.setattr(curate_stage, "run_curate", lambda cfg: mlflow.log_param("stub", "curate") or tmp_path)
    assert main(["curate", "--workdir", str(tmp_path / "kw"), "--tracking-uri", other]) == 0
    monkeypatch.setattr(train_stage, "check_train_config", lambda cfg: None)
    monkeypatch.setattr(train_stage, "run_train", lambda cfg: train_stage.TrainResult(
        tmp_path, mlflow.active_run().info.run_id, None, 0.0, 0.0))  # type: ignore[union-attr]
    assert main(["train", "--workdir", str(tmp_path / "kw"), "--tracking-uri", other,
                 "--system-metrics", "false"]) == 0
    assert len(_runs(other, "curate")) == 1 and len(_runs(other, "train")) == 1
    assert not (tmp_path / "kw" / "mlflow.db").exists()


def test_pipeline_opens_the_named_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelwright import pipeline
    from kernelwright.training.stage import TrainResult

    monkeypatch.setattr(pipeline, "run_curate", lambda cfg: tmp_path)
    monkeypatch.setattr(pipeline, "run_train", lambda cfg: TrainResult(tmp_path, None, None, 0.5, 0.0))
    monkeypatch.setattr(pipeline, "run_evaluate", lambda cfg: "figures")
    other = f"sqlite:///{tmp_path / 'other.db'}"
    result = pipeline.run_pipeline(PipelineConfig(workdir=str(tmp_path / "kw"), tracking_uri=other))
    assert result.tracking_uri == other and len(_runs(other, "pipeline")) == 1
    assert {r.info.run_name for r in MlflowClient(other).search_runs(
        [MlflowClient(other).get_experiment_by_name(EXPERIMENT).experiment_id])} == {  # type: ignore[union-attr]
        "pipeline", "curate", "train", "evaluate"}
    assert not (tmp_path / "kw" / "mlflow.db").exists()


def test_serve_resolves_models_in_the_named_store(tmp_path: Path) -> None:
    from kernelwright.serving.loading import resolve_model, use_store

    other = f"sqlite:///{tmp_path / 'other.db'}"
    client = MlflowClient(other)
    client.create_registered_model("kernelwright-coder")
    client.create_model_version("kernelwright-coder", str(tmp_path))
    client.set_registered_model_alias("kernelwright-coder", "champion", "1")
    cfg = ServeConfig(workdir=str(tmp_path / "kw"), tracking_uri=other)
    use_store(cfg)
    assert resolve_model(cfg.model)[1].version == "1"
    with pytest.raises(UsageError, match="no MLflow store at"):
        use_store(ServeConfig(workdir=str(tmp_path / "kw"), tracking_uri=f"sqlite:///{tmp_path / 'none.db'}"))


def test_schedule_passes_it_to_every_retrain_and_keeps_passwords_out_of_outcomes(tmp_path: Path) -> None:
    uri = "postgresql://kw:secret@db:5432/mlflow"
    argv = retrain_argv(ScheduleConfig(workdir=str(tmp_path), tracking_uri=uri))
    assert argv[-2:] == ["--tracking-uri", uri]
    run_retrain_job(["true", "--tracking-uri", uri], 0, str(tmp_path / "outcomes"))
    (outcome,) = (tmp_path / "outcomes").iterdir()
    assert "secret" not in outcome.read_text() and "kw:***@db" in outcome.read_text()


def test_tracking_env_puts_the_variable_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///before.db")
    with tracking_env("sqlite:///during.db"):
        assert os.environ["MLFLOW_TRACKING_URI"] == "sqlite:///during.db"
    with tracking_env(None):
        assert os.environ["MLFLOW_TRACKING_URI"] == "sqlite:///before.db"
    assert os.environ["MLFLOW_TRACKING_URI"] == "sqlite:///before.db"


def _open_store(folder: str, barrier: Any, results: Any) -> None:
    """One command's start, in a process of its own: the store opened and the experiment selected."""
    from kernelwright.store import Store
    from kernelwright.tracking import setup_tracking

    barrier.wait()
    try:
        results.put(setup_tracking(Store.resolve(folder)))
    except BaseException as e:  # noqa: BLE001 - the child reports whatever it met
        results.put(f"{type(e).__name__}: {e}")


def test_commands_started_together_on_a_new_store_all_open_it(tmp_path: Path) -> None:
    """MLflow creates a SQLite store's tables and the experiment non-atomically: without the store's lock,
    one of two processes started at once failed ("table experiment_tags already exists", alembic)."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_open_store, args=(str(tmp_path), barrier, results)) for _ in range(2)]
    for p in procs:
        p.start()
    got = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
    assert len(set(got)) == 1 and got[0].isdigit(), got  # one experiment, the same id for both
    assert sqlite_file(f"sqlite:///{tmp_path}/mlflow.db") == tmp_path / "mlflow.db"
    assert sqlite_file("sqlite:///rel/m.db?mode=ro") == Path("rel/m.db")
    assert sqlite_file("postgresql://h/db") is None and sqlite_file("sqlite://") is None


def test_a_store_in_a_folder_not_made_yet_opens_as_mlflow_makes_it(tmp_path: Path) -> None:
    from kernelwright.store import Store
    from kernelwright.tracking import setup_tracking

    missing = tmp_path / "no" / "such"
    assert setup_tracking(Store(tmp_path, f"sqlite:///{missing}/mlflow.db")).isdigit()
    assert (missing / "mlflow.db").is_file()
    blocked = tmp_path / "a_file"
    blocked.write_text("")
    with pytest.raises(UsageError, match="cannot be used"):  # no folder can be made there: MLflow's error
        setup_tracking(Store(tmp_path, f"sqlite:///{blocked}/sub/mlflow.db"))


def test_a_folder_the_lock_cannot_be_written_in_opens_its_store_without_it(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A store in a folder this user may read but not write (a shared, read-only store): opened as before."""
    import filelock

    from kernelwright.store import Store
    from kernelwright.tracking import setup_tracking

    first = setup_tracking(Store.resolve(tmp_path))

    def refused(self: object, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(tmp_path / "mlflow.db.lock"))

    monkeypatch.setattr(filelock.FileLock, "acquire", refused)
    assert setup_tracking(Store.resolve(tmp_path)) == first
