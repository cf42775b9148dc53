"""The opt-in cProfile of a verification's processes (verifier/cpu_profile.py) and its summary
(bench/cpu_profile_summary.py): written only when asked, the runner's file read as untrusted."""

from __future__ import annotations

import importlib
import os
import pstats
import sys
from pathlib import Path

import pytest

from kernelwright.verifier import cpu_profile
from kernelwright.verifier.cpu_profile import RUNNER_FILE, keep_runner_profile, profiled
from kernelwright.verifier.judge_process import _settings
from kernelwright.verifier.runner import Runner, serve
from kernelwright.verifier.spec import Spec
from tests.verifier.scripted_end import ScriptedEnd

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "bench"))
summary = importlib.import_module("cpu_profile_summary")


def _busy(n: int) -> int:
    return sum(i * i for i in range(n))


def test_a_profile_is_written_only_where_a_folder_is_named(tmp_path: Path) -> None:
    with profiled(None, "judge-1.prof") as off:
        _busy(1000)
    assert off is None and not list(tmp_path.iterdir())
    with profiled(str(tmp_path), "judge-1.prof"):
        _busy(20000)
    names = {f"{Path(f).name}:{fn}" for f, _line, fn in pstats.Stats(str(tmp_path / "judge-1.prof")).stats}  # type: ignore[attr-defined]
    assert any(n.endswith(":_busy") for n in names)
    assert [p.name for p in tmp_path.iterdir()] == ["judge-1.prof"]  # no temporary file left
    with profiled(str(tmp_path / "gone"), "judge-2.prof"):  # a folder that is not there: no file, no error
        _busy(10)


def test_the_runners_profile_is_copied_out_as_an_untrusted_file(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    scratch, folder = tmp_path / "scratch", tmp_path / "profiles"
    scratch.mkdir()
    folder.mkdir()
    assert keep_runner_profile(scratch, str(folder)) is None  # none written
    (scratch / RUNNER_FILE).write_bytes(b"profile bytes")
    assert keep_runner_profile(scratch, None) is None and not list(folder.iterdir())  # profiling off
    kept = keep_runner_profile(scratch, str(folder))
    assert kept == folder / f"runner-{os.getpid()}.prof" and kept.read_bytes() == b"profile bytes"
    kept.unlink()
    secret = tmp_path / "secret"
    secret.write_text("the judge's file")
    (scratch / RUNNER_FILE).unlink()
    (scratch / RUNNER_FILE).symlink_to(secret)  # a link to what the runner may not read: not followed
    assert keep_runner_profile(scratch, str(folder)) is None
    (scratch / RUNNER_FILE).unlink()
    (scratch / RUNNER_FILE).write_bytes(b"x" * 65)
    monkeypatch.setattr(cpu_profile, "MAX_PROFILE_BYTES", 64)
    assert keep_runner_profile(scratch, str(folder)) is None and not list(folder.iterdir())  # too large
    monkeypatch.setattr(cpu_profile, "MAX_PROFILE_BYTES", 1 << 20)
    assert keep_runner_profile(scratch, str(tmp_path / "gone")) is None  # no folder: no profile, no error


def test_the_runner_writes_its_profile_before_it_answers_finish(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    runner = Runner({"timing": {}}, tmp_path, ScriptedEnd(["call", "finish", "call"], log))  # type: ignore[arg-type]
    monkeypatch.setattr(runner, "load", lambda _req: {})
    serve(runner, before_finish=lambda: log.append("profile written"))
    assert log == ["call", "profile written", "finish"]  # the judge ends the runner once answered
    spec = Spec(problem="p.py", candidate="c.py", result="r.json")
    assert _settings(spec, tmp_path)["cpu_profile"] is False
    spec.cpu_profile = str(tmp_path)
    assert _settings(spec, tmp_path)["cpu_profile"] is True  # a flag: the runner writes into its scratch only


def test_the_summary_adds_up_each_roles_files_per_process(tmp_path: Path) -> None:
    for name, n in (("judge-1.prof", 30000), ("judge-2.prof", 30000), ("runner-1.prof", 1000)):
        with profiled(str(tmp_path), name):
            _busy(n)
    (tmp_path / "runner-2.prof").write_bytes(b"not a profile")  # skipped, named on stderr
    got = summary.summarise(tmp_path, top=50)
    assert got["judge"]["processes"] == 2 and got["runner"]["processes"] == 1
    busy = [r for r in got["judge"]["by_own_time"] if r["function"].endswith("(_busy)")]
    assert busy and busy[0]["calls"] == 1.0  # one call per process: the mean over the two files
    assert busy[0]["cumulative_s"] > 0 and got["judge"]["profiled_s_per_process"] > 0
    assert summary.summarise(tmp_path / "none") == {"judge": {"processes": 0}, "runner": {"processes": 0}}
    assert summary.main([str(tmp_path / "missing")]) == 2
