"""A small folder of real code to pretrain on in seconds, with an evaluation problem planted in it."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path

import pytest

from kernelwright.base_model.corpus import exclusion_folders

STDLIB = Path(sysconfig.get_paths()["stdlib"])
PLANTED = "planted_eval_problem.py"


@pytest.fixture()
def code_dir(tmp_path: Path) -> Path:
    """A few standard-library modules (~60k characters) and a copy of one evaluation-suite problem."""
    out = tmp_path / "code"
    out.mkdir()
    for name in ("textwrap.py", "colorsys.py", "bisect.py", "heapq.py", "fnmatch.py", "shlex.py"):
        shutil.copy(STDLIB / name, out / name)
    suite = exclusion_folders()[1]
    shutil.copy(sorted(suite.rglob("*.py"))[0], out / PLANTED)
    return out


@pytest.fixture(autouse=True)
def _mlflow_globals_restored(monkeypatch):
    """A build inside a stage run selects an experiment (exported to the environment) and a tracking URI for
    the process: put them back."""
    import mlflow
    import mlflow.tracking.fluent as fluent

    monkeypatch.setattr(fluent, "_active_experiment_id", fluent._active_experiment_id)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", "")  # set_experiment exports it: removed again after the test
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID")
    yield
    mlflow.set_tracking_uri(None)
