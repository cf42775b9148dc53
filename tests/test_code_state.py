"""The code a run ran, on its MLflow run: version, commit, uncommitted changes (a real git checkout in tmp)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

import kernelwright
from kernelwright.code_state import DIFF_ARTIFACT, CodeState, read_code_state, tag_code_state
from kernelwright.store import Store
from kernelwright.tracking import stage_run, tracking_session

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    git(root, "init", "-q")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "kernel.py").write_text("x = 1\n")
    (root / ".gitignore").write_text("*.log\n")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first")
    return root


@needs_git
def test_a_clean_checkout_is_its_commit_and_a_changed_one_says_what_changed(checkout: Path) -> None:
    clean = read_code_state(checkout / "pkg")
    assert clean.commit == git(checkout, "rev-parse", "HEAD") and not clean.dirty and clean.diff == ""
    assert clean.tags() == {"kw.code.version": kernelwright.__version__, "kw.code.commit": clean.commit,
                            "kw.code.dirty": "false"}
    (checkout / "kernel.py").write_text("x = 2\n")
    (checkout / "new_op.py").write_text("y = 3\n")
    (checkout / "run.log").write_text("ignored\n")
    dirty = read_code_state(checkout / "pkg")
    assert dirty.dirty and "-x = 1" in dirty.diff and "+x = 2" in dirty.diff
    assert "untracked: new_op.py" in dirty.diff and "run.log" not in dirty.diff  # git's ignore rules apply
    assert dirty.tags()["kw.code.dirty"] == "true" and len(dirty.tags()["kw.code.diff_sha256"]) == 64
    (checkout / "kernel.py").write_text("x = 4\n")
    assert read_code_state(checkout / "pkg").diff_sha256 != dirty.diff_sha256  # two dirty trees told apart


def test_outside_a_checkout_only_the_version_is_known(tmp_path: Path) -> None:
    state = read_code_state(tmp_path)
    assert state == CodeState(kernelwright.__version__)
    assert state.tags() == {"kw.code.version": kernelwright.__version__}


@needs_git
def test_a_package_installed_inside_another_repository_is_not_that_repositorys_code(checkout: Path) -> None:
    installed = checkout / ".venv" / "site-packages" / "kernelwright"  # untracked: not the checkout's code
    installed.mkdir(parents=True)
    (installed / "__init__.py").write_text("")
    assert read_code_state(installed) == CodeState(kernelwright.__version__)


def test_a_run_gets_the_state_and_the_diff_and_a_resume_keeps_the_first(tmp_path: Path) -> None:
    dirty = CodeState("0.1.0", "a" * 40, True, "diff --git a/k.py b/k.py\n-x = 1\n+x = 2\n")
    with tracking_session(Store.resolve(tmp_path / "wd")):
        with mlflow.start_run() as run:
            tag_code_state(dirty)
        with mlflow.start_run(run_id=run.info.run_id):  # the same code again: nothing to add
            tag_code_state(dirty)
        client = MlflowClient()
        tags = client.get_run(run.info.run_id).data.tags
        assert {k: v for k, v in tags.items() if k.startswith("kw.code.")} == dirty.tags()
        text = Path(client.download_artifacts(run.info.run_id, DIFF_ARTIFACT, str(tmp_path / "a"))).read_text()
        assert text == dirty.diff
        with mlflow.start_run(run_id=run.info.run_id):  # resumed from other code
            tag_code_state(CodeState("0.1.0", "b" * 40))
        tags = client.get_run(run.info.run_id).data.tags
        assert tags["kw.code.commit"] == "a" * 40 and tags["kw.code.resumed_with"] == "0.1.0 " + "b" * 40


def test_a_top_level_stage_run_is_tagged_and_its_children_are_not(tmp_path: Path) -> None:
    with tracking_session(Store.resolve(tmp_path / "wd")):
        with stage_run("pipeline") as parent, stage_run("train") as child:
            pass
        client = MlflowClient()
        assert client.get_run(parent.info.run_id).data.tags["kw.code.version"] == kernelwright.__version__
        assert "kw.code.version" not in client.get_run(child.info.run_id).data.tags
