"""The runner's confinement: it writes only beneath its scratch folder, imports nothing planted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.verifier import judge_process, sandbox
from kernelwright.verifier.sandbox import import_roots, landlock_abi, make_scratch, remove_scratch, runner_env

CONFINED = """
import sys
from pathlib import Path
sys.path[:0] = sys.argv[3].split(":")
from kernelwright.verifier.sandbox import confine
print(confine([Path(sys.argv[1])]), flush=True)
Path(sys.argv[1], "mine.txt").write_text("ok")
for target in (Path(sys.argv[2]) / "planted.py", Path(sys.argv[2]) / "cache" / "ref.json"):
    try:
        target.parent.mkdir(exist_ok=True)
        target.write_text("x = 1")
        print("wrote", target)
    except PermissionError:
        print("refused", target.name)
"""


@pytest.mark.skipif(landlock_abi() == 0, reason="this kernel offers no Landlock")
def test_a_confined_process_writes_only_beneath_its_scratch(tmp_path: Path) -> None:
    scratch, outside = tmp_path / "scratch", tmp_path / "judge"
    scratch.mkdir()
    outside.mkdir()
    (outside / "cache").mkdir()
    roots = ":".join(import_roots())
    run = subprocess.run([sys.executable, "-I", "-c", CONFINED, str(scratch), str(outside), roots],
                         capture_output=True, text=True, timeout=60, check=True)
    lines = run.stdout.splitlines()
    assert lines[0].startswith("landlock abi ")
    assert lines[1:] == ["refused planted.py", "refused ref.json"]
    assert (scratch / "mine.txt").read_text() == "ok"
    assert not (outside / "planted.py").exists() and not (outside / "cache" / "ref.json").exists()


def test_the_runner_starts_isolated_from_planted_modules(tmp_path: Path) -> None:
    """`python -I` from a folder holding a planted json.py imports the standard one; the import
    roots are the package's folder and the judge's own, never its working folder."""
    (tmp_path / "json.py").write_text("raise SystemExit('planted module imported')")
    probe = "import json, sys; print(json.__file__)"
    cmd = judge_process.runner_command(Path("settings.json"))
    assert cmd[:2] == [sys.executable, "-I"]
    run = subprocess.run([sys.executable, "-I", "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)}, check=True)
    assert not run.stdout.strip().startswith(str(tmp_path))
    os.chdir(tmp_path)
    try:
        assert str(tmp_path) not in import_roots()
    finally:
        os.chdir(Path(__file__).resolve().parents[2])


def test_the_runner_environment_names_only_its_scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWRIGHT_RESULT", "/judge/result.json")
    monkeypatch.setenv("PYTHONPATH", "/judge/site")
    scratch = make_scratch(None, str(tmp_path))
    try:
        env = runner_env(scratch)
        assert {env["HOME"], env["TMPDIR"], env["TORCH_EXTENSIONS_DIR"]} <= {
            str(scratch), str(scratch / "tmp"), str(scratch / "builds")}
        assert "KERNELWRIGHT_RESULT" not in env and "PYTHONPATH" not in env
        assert oct(scratch.stat().st_mode & 0o777) == "0o700"
    finally:
        remove_scratch(scratch)
    assert not scratch.exists()


def test_a_user_that_cannot_start_the_runner_is_said_loudly(monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 0)
    monkeypatch.setattr(sandbox, "_why_not_run_as", lambda uid, gid: "ModuleNotFoundError: No module named 'torch'")
    sandbox._probed_runner_user.cache_clear()
    try:
        with caplog.at_level("WARNING", logger="kernelwright.verifier.sandbox"):
            assert sandbox.runner_user() is None
    finally:
        sandbox._probed_runner_user.cache_clear()
    assert "share the judge's user" in caplog.text and "No module named 'torch'" in caplog.text


def test_threads_that_ask_at_once_share_one_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """verify_many's threads each build a spec at once: every one of them probed the runner's user (16
    imports of torch as that user, and 16 warnings, per evaluation on an H100 host)."""
    import threading
    import time

    probes: list[int] = []

    def slow_probe(uid: int, gid: int) -> str:
        probes.append(uid)
        time.sleep(0.2)
        return ""

    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 0)
    monkeypatch.setattr(sandbox, "_why_not_run_as", slow_probe)
    sandbox._probed_runner_user.cache_clear()
    try:
        found: list[object] = []
        threads = [threading.Thread(target=lambda: found.append(sandbox.runner_user())) for _ in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sandbox._probed_runner_user.cache_clear()
    assert len(probes) == 1 and len(found) == 8 and len(set(found)) == 1 and found[0] is not None
