"""`evaluate --ray`: the same evaluation verified by local workers and by Ray tasks gives the same rows; each
Ray task runs in a fresh process and takes the node's timing lock. `verify.run_worker` is replaced by a double
(tests/evaluation/_ray_worker.py), which the Ray path sends to its tasks, so this runs on a CPU."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.evaluation import stage
from kernelwright.evaluation.config import EvaluateConfig
from kernelwright.evaluation.stage import run_evaluate
from kernelwright.verifier import ray_fanout, verify
from tests.evaluation._ray_worker import FakeWorker, fails, marks

FIXTURES = Path(__file__).parent.parent / "fixtures" / "verify"
CANDIDATES = {"affine": ["honest_affine.py", "half_output.py"], "relu_nonneg": ["identity_for_relu.py",
                                                                                "honest_joined_stream.py"]}


@pytest.fixture()
def evaluation(tmp_path: Path) -> dict[str, object]:
    """Two problems, two candidates each, all of which pass the static checks (so all four are verified)."""
    for problem, files in CANDIDATES.items():
        (tmp_path / "suite" / "level1").mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / "problems" / f"{problem}.py", tmp_path / "suite" / "level1" / f"{problem}.py")
        for k, name in enumerate(files):
            (tmp_path / "gen" / "level1" / problem).mkdir(parents=True, exist_ok=True)
            shutil.copy(FIXTURES / "candidates" / name, tmp_path / "gen" / "level1" / problem / f"sample_{k}.py")
    return {"suite": str(tmp_path / "suite"), "generations": str(tmp_path / "gen"), "samples": 2, "gate": False,
            "workdir": str(tmp_path / "kw")}


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[None]:
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'kernelwright[ray]')")
    # one GPU declared (none is there): tasks reserve a share of one, and the double never touches it
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False)
    yield
    ray.shutdown()


def test_local_workers_and_ray_tasks_give_the_same_rows(
        ray_instance: None, evaluation: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stage, "cuda_available", lambda: True)  # the local run's GPU; Ray's is declared above
    monkeypatch.setattr(verify, "run_worker", FakeWorker(str(tmp_path / "marks-local")))
    here = run_evaluate(EvaluateConfig(**evaluation, out=str(tmp_path / "here")))
    monkeypatch.setattr(verify, "run_worker", FakeWorker(str(tmp_path / "marks-ray")))
    on_ray = run_evaluate(EvaluateConfig(**evaluation, out=str(tmp_path / "on-ray"), ray="auto"))

    assert here.gpu_verified and on_ray.gpu_verified
    assert [r.flat() for r in on_ray.rows] == [r.flat() for r in here.rows]
    assert {r.verdict.reason for r in here.rows} == {"ok", "wrong_output"}  # the double tells candidates apart
    assert on_ray.metrics == here.metrics
    local, remote = marks(tmp_path / "marks-local"), marks(tmp_path / "marks-ray")
    assert len(local) == len(remote) == 4
    assert {m["pid"] for m in local} == {os.getpid()}
    assert len({m["pid"] for m in remote}) == 4 and os.getpid() not in {m["pid"] for m in remote}  # fresh processes
    assert {m["timing_lock"] for m in remote} == {verify.host_timing_lock()}  # one lock per node


def test_a_task_that_fails_is_a_crash_verdict(ray_instance: None, evaluation: dict) -> None:
    from kernelwright.verifier.config import VerifyConfig

    problem = Path(str(evaluation["suite"])) / "level1" / "affine.py"
    cfg = VerifyConfig(problem=str(problem), candidate=str(FIXTURES / "candidates" / "honest_affine.py"))
    (verdict,) = ray_fanout.verify_on_ray([cfg], 0.5, worker=fails)
    assert verdict.reason == "crash" and "Ray task ended without a verdict" in verdict.detail


def test_a_cluster_without_gpus_verifies_nothing_and_says_why(evaluation: dict, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    @contextmanager
    def no_gpus(address: str) -> Iterator[float]:
        yield 0.0

    monkeypatch.setattr(stage, "connected", no_gpus)
    monkeypatch.setattr(stage, "import_ray", lambda: None)
    result = run_evaluate(EvaluateConfig(**evaluation, out=str(tmp_path / "out"), ray="auto"))
    assert not result.gpu_verified and result.gpu_reason == stage.NO_RAY_GPU_REASON
    assert {r.verdict.reason for r in result.rows} == {"no_gpu"}


def test_ray_files_are_copied_where_the_node_cannot_read_them(tmp_path: Path) -> None:
    from kernelwright.verifier.config import VerifyConfig

    cfg = VerifyConfig(problem="/nonexistent-dir/p.py", candidate=str(FIXTURES / "candidates" / "honest_affine.py"),
                       build_cache="/proc/no-such-cache")
    source = (FIXTURES / "candidates" / "honest_affine.py").read_bytes()
    problem = b"# -*- coding: latin-1 -*-\n# caf\xe9\n"  # travels as the bytes Python decodes by their coding line
    moved = ray_fanout.on_this_node(cfg, problem, source, tmp_path)
    assert Path(moved.problem).read_bytes() == problem and Path(moved.problem).name == "p.py"
    assert moved.candidate == cfg.candidate  # readable here, with the same source: used as it is
    assert moved.build_cache is None  # the driver's folder cannot be made here: the node's default


@pytest.mark.parametrize("argv, message", [
    (["--ray", "auto", "--ray-gpu-fraction", "0"], "ray_gpu_fraction is a share of one GPU"),
    (["--ray", "auto", "--ray-gpu-fraction", "2"], "ray_gpu_fraction is a share of one GPU"),
])
def test_bad_ray_arguments_are_one_line_and_exit_2(argv: list[str], message: str, evaluation: dict,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", "--suite", str(evaluation["suite"]), "--generations", str(evaluation["generations"]),
                 *argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and message in err


def test_without_ray_installed_the_flag_says_how_to_install_it(
        evaluation: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    assert main(["evaluate", "--suite", str(evaluation["suite"]), "--generations", str(evaluation["generations"]),
                 "--workdir", str(evaluation["workdir"]), "--ray", "auto"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'kernelwright[ray]'" in err and "Traceback" not in err
    assert not (Path(str(evaluation["workdir"])) / "mlflow.db").exists()  # refused before the store is opened


def test_the_retrain_gate_verifies_on_ray_over_one_connection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from kernelwright.retrain import champion
    from kernelwright.retrain.config import RetrainConfig

    opened: list[str] = []
    evaluated: list[EvaluateConfig] = []

    @contextmanager
    def connection(address: str) -> Iterator[float]:
        opened.append(address)
        yield 1.0

    monkeypatch.setattr(champion, "connected", connection)
    monkeypatch.setattr(champion, "alias_version", lambda name, alias: None)
    monkeypatch.setattr(champion, "recorded_figures", lambda *a: None)
    monkeypatch.setattr(champion, "stage_run", lambda *a, **k: nullcontext())
    monkeypatch.setattr(champion, "_tagged", lambda name, version, outcome: outcome)
    monkeypatch.setattr(champion, "run_evaluate", lambda cfg, verifier: evaluated.append(cfg) or SimpleNamespace(
        gpu_verified=False))
    cfg = RetrainConfig(workdir=str(tmp_path), ray="ray://head:10001", ray_gpu_fraction=0.5)
    outcome = champion.run_gate(cfg, "3", champion.GateScope({}, "key", tmp_path), None)
    assert outcome.decision == champion.NOT_GATED and opened == ["ray://head:10001"]
    assert [(c.ray, c.ray_gpu_fraction) for c in evaluated] == [("ray://head:10001", 0.5)]


def test_retrain_without_ray_installed_is_refused_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    assert main(["retrain", "--workdir", str(tmp_path), "--ray", "auto"]) == 2
    assert "pip install 'kernelwright[ray]'" in capsys.readouterr().err
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "retrain.lock").exists()
