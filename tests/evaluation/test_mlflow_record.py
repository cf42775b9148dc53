"""What an evaluate run leaves in MLflow: one tag for the figures that do not apply, and a per-problem
table whose candidates are named by their place among the run's artifacts, not by a path of this machine."""

from __future__ import annotations

import shutil
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from kernelwright.evaluation import stage
from kernelwright.evaluation.config import EvaluateConfig
from kernelwright.evaluation.report import TAG_CHARS, candidate_artifact, not_applicable_note
from kernelwright.evaluation.stage import run_evaluate
from kernelwright.tracking import setup_tracking

FIXTURES = Path(__file__).parent.parent / "fixtures" / "verify"


def _suite(tmp_path: Path) -> Path:
    root = tmp_path / "suite" / "level1"
    root.mkdir(parents=True)
    for name in ("affine.py", "relu_nonneg.py"):
        shutil.copy(FIXTURES / "problems" / name, root / name)
    return tmp_path / "suite"


def _generations(gen: Path) -> Path:
    """affine: samples 0 and 1; relu_nonneg: sample 0 only (its sample 1 is missing)."""
    (gen / "level1" / "affine").mkdir(parents=True)
    shutil.copy(FIXTURES / "candidates" / "honest_affine.py", gen / "level1" / "affine" / "sample_0.py")
    shutil.copy(FIXTURES / "candidates" / "fallback_try_except.py", gen / "level1" / "affine" / "sample_1.py")
    (gen / "level1" / "relu_nonneg").mkdir()
    shutil.copy(FIXTURES / "candidates" / "identity_for_relu.py", gen / "level1" / "relu_nonneg" / "sample_0.py")
    return gen


def _logged_run(tmp_path: Path, gen: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """(experiment id, run id) of a CPU evaluation of `gen` into `out`, logged to a fresh store."""
    exp_id = setup_tracking(tmp_path / "kw")
    monkeypatch.setattr(stage, "cuda_available", lambda: False)
    with mlflow.start_run() as run:
        run_evaluate(EvaluateConfig(suite=str(_suite(tmp_path)), generations=str(gen), samples=2, out=str(out),
                                    workdir=str(tmp_path / "kw")))
    return exp_id, run.info.run_id


def _candidates(exp_id: str, run_id: str) -> list[str]:
    table = MlflowClient().load_table(exp_id, "evaluate/per_problem.json", run_ids=[run_id])
    return list(table["candidate"])


def test_figures_that_do_not_apply_are_one_tag_and_one_artifact(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _, run_id = _logged_run(tmp_path, _generations(tmp_path / "gen"), tmp_path / "out", monkeypatch)
    tags = MlflowClient().get_run(run_id).data.tags
    assert not [k for k in tags if k.startswith("not_applicable.")]
    listed = mlflow.artifacts.load_dict(f"runs:/{run_id}/evaluate/not_applicable.json")
    assert len(listed) > 20 and set(listed.values()) == {stage.NO_GPU_REASON}
    assert tags["not_applicable"] == f"{len(listed)} figures (evaluate/not_applicable.json): {stage.NO_GPU_REASON}"


def test_external_candidates_are_logged_and_named_by_their_artifact_path(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    exp_id, run_id = _logged_run(tmp_path, _generations(tmp_path / "gen"), tmp_path / "out", monkeypatch)
    got = _candidates(exp_id, run_id)
    assert got == ["evaluate/candidates/level1/affine/sample_0.py", "evaluate/candidates/level1/affine/sample_1.py",
                   "evaluate/candidates/level1/relu_nonneg/sample_0.py", ""]
    fetched = Path(mlflow.artifacts.download_artifacts(run_id=run_id, dst_path=str(tmp_path / "fetched")))
    assert (fetched / got[0]).read_text() == (FIXTURES / "candidates" / "honest_affine.py").read_text()
    assert all((fetched / c).is_file() for c in got if c)


def test_candidates_in_the_results_folder_keep_their_place_there(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    exp_id, run_id = _logged_run(tmp_path, _generations(out / "generations"), out, monkeypatch)
    got = _candidates(exp_id, run_id)
    assert got[:3] == ["evaluate/generations/level1/affine/sample_0.py",
                       "evaluate/generations/level1/affine/sample_1.py",
                       "evaluate/generations/level1/relu_nonneg/sample_0.py"]
    fetched = Path(mlflow.artifacts.download_artifacts(run_id=run_id, dst_path=str(tmp_path / "fetched")))
    assert all((fetched / c).is_file() for c in got if c)
    assert not (fetched / "evaluate" / "candidates").exists()  # nothing logged twice


def test_candidate_artifact_paths_ignore_how_the_folders_were_spelled(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out, gen = Path("E"), Path("G")
    assert candidate_artifact(str(tmp_path / "E" / "generations" / "p" / "sample_0.py"), out, gen) == \
        "evaluate/generations/p/sample_0.py"
    assert candidate_artifact("G/p/sample_1.py", out, tmp_path / "G") == "evaluate/candidates/p/sample_1.py"
    assert candidate_artifact("", out, gen) == ""


def test_the_note_counts_each_reason_and_stays_short() -> None:
    assert not_applicable_note({}) == ""
    note = not_applicable_note({"geomean_speedup": "no correct sample", "own.geomean_speedup": "no correct sample",
                                "mean_roofline_share": "no FLOP count"})
    assert note == "3 figures (evaluate/not_applicable.json): no correct sample (2); no FLOP count (1)"
    long = not_applicable_note({f"f{i}": f"reason number {i} " * 10 for i in range(40)})
    assert len(long) == TAG_CHARS and long.endswith("...")
