"""Verification: static paths on any machine; the fixtures' verdicts on a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kernelwright.cli import main
from kernelwright.verifier.isolation import SPLIT_PATHS
from kernelwright.verifier.verdict import REASON_STATUS, Verdict
from kernelwright.verifier.verify import (
    WARNED_STATIC_REASONS,
    VerifyConfig,
    make_spec,
    source_warnings,
    static_verdict,
    verify_many,
    verify_one,
)
from kernelwright.verifier.watching import watch

FIXTURES = Path(__file__).parent.parent / "fixtures" / "verify"
EXPECTED: dict[str, dict[str, str]] = json.loads((FIXTURES / "expected.json").read_text())
STATIC_REASONS = {"fallback_try_except", "harness_tampering", "no_kernel", "syntax_error"}
# tampering with no static trace: the runner's guard catches it
RUN_TIME_ONLY = {"patch_harness_method.py", "patch_reference_model.py", "code_swap_compare.py"}


def _cfg(name: str, **kw) -> VerifyConfig:
    entry = EXPECTED[name]
    return VerifyConfig(problem=str(FIXTURES / "problems" / entry["problem"]),
                        candidate=str(FIXTURES / "candidates" / name), **kw)


def test_every_expected_reason_is_documented() -> None:
    assert {e["reason"] for e in EXPECTED.values()} <= set(REASON_STATUS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_static_checks_on_fixtures(name: str) -> None:
    """Static rejections as expected; PyTorch compute in ModelNew is the fixture's `warning` only."""
    source = (FIXTURES / "candidates" / name).read_text()
    verdict = static_verdict(source)
    expected = EXPECTED[name]["reason"]
    if (expected in STATIC_REASONS or name == "patch_timer.py") and name not in RUN_TIME_ONLY:
        assert verdict is not None and verdict.reason == expected
    else:
        assert verdict is None, verdict
    assert source_warnings(source) == ([EXPECTED[name]["warning"]] if "warning" in EXPECTED[name] else [])


def test_verify_static_exit_codes_and_json(tmp_path: Path) -> None:
    cfg = _cfg("honest_affine.py")
    out = tmp_path / "v.json"
    assert main(["verify", "--problem", cfg.problem, "--candidate", cfg.candidate, "--static", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["static_only"] is True and data["reason"] == "static_ok"
    bad = _cfg("fallback_try_except.py")
    assert main(["verify", "--problem", bad.problem, "--candidate", bad.candidate, "--static"]) == 1


def test_verify_bad_input_exits_2(tmp_path: Path) -> None:
    cfg = _cfg("honest_affine.py")
    assert main(["verify", "--problem", str(tmp_path / "missing.py"), "--candidate", cfg.candidate]) == 2
    broken = tmp_path / "broken.py"
    broken.write_text("class ModelNew(:\n")
    assert main(["verify", "--problem", cfg.problem, "--candidate", str(broken), "--static"]) == 2
    assert main(["verify", "--problem", cfg.candidate, "--candidate", cfg.candidate, "--static"]) == 2


def test_verify_without_gpu_exits_3() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    cfg = _cfg("honest_affine.py")
    assert main(["verify", "--problem", cfg.problem, "--candidate", cfg.candidate]) == 3


def test_verdict_json_round_trip() -> None:
    v = Verdict.of("ok", "fine", runtime_ms=1.5, ref_runtime_ms=3.0, speedup=2.0)
    assert Verdict.from_json(v.to_json()) == v


@pytest.mark.gpu
def test_the_compile_baseline_is_timed_on_gpu(tmp_path: Path) -> None:
    """`verify`'s default path: the reference's torch.compile baseline timed beside the reference
    (an OptimizedModule's truth value calls len(), which a plain module lacks)."""
    cfg = _cfg("honest_affine.py", compile_baseline=True, build_cache=str(tmp_path / "builds"))
    verdict = verify_many([cfg], jobs=1)[0]
    assert verdict.correct, verdict.detail
    assert verdict.ref_compile_runtime_ms is not None and verdict.ref_compile_runtime_ms > 0


@pytest.mark.gpu
def test_fixtures_give_their_verdicts_on_gpu(tmp_path: Path) -> None:
    """Every cheat rejected with its reason, every fault contained, honest ones accepted after them."""
    names = sorted((n for n in EXPECTED if not EXPECTED[n].get("hostile")),
                   key=lambda n: (n.startswith("honest"), n))  # honest ones last; hostile: test_hostile.py
    cfgs = [_cfg(n, timeout_s=240.0 if n != "fault_hang.py" else 150.0, compile_baseline=False,
                 build_cache=str(tmp_path / "builds")) for n in names]
    verdicts = verify_many(cfgs, jobs=8)
    got = {n: (v.reason, v.detail[:300]) for n, v in zip(names, verdicts, strict=True)}
    (tmp_path / "verdicts.json").write_text(json.dumps({n: v.to_json() for n, v in zip(names, verdicts, strict=True)},
                                                       indent=1))
    wrong = {n: got[n] for n in names if got[n][0] != EXPECTED[n]["reason"]}
    assert not wrong, wrong
    warned = {n: v for n, v in zip(names, verdicts, strict=True) if "warning" in EXPECTED[n]}
    # the static finding is recorded; a timing note (a speedup over 10x, disturbed timings) may join it
    timing_notes = ("speedup ", "other work on the GPU")
    assert all(EXPECTED[n]["warning"] in v.warnings and all(
        w == EXPECTED[n]["warning"] or w.startswith(timing_notes) for w in v.warnings)
        for n, v in warned.items()), {n: v.warnings for n, v in warned.items()}
    assert all((v.custom_kernel_time_share or 0.0) >= 0.1 for v in warned.values() if v.correct), warned
    by_name = dict(zip(names, verdicts, strict=True))
    for n, spec in EXPECTED.items():  # a replay that is timed honestly is no faster than honest code
        if "no_faster_than" in spec:
            other = by_name[spec["no_faster_than"]["fixture"]]
            assert by_name[n].speedup is not None and other.speedup is not None
            assert by_name[n].speedup <= spec["no_faster_than"]["factor"] * other.speedup, (n, by_name[n].speedup,
                                                                                          other.speedup)
    honest = {n: v.build for n, v in zip(names, verdicts, strict=True) if n.startswith("honest")}
    assert all(b in SPLIT_PATHS for b in honest.values()), honest  # the split build is what ran, and was right


def _spawn(code: str, err: Any = subprocess.DEVNULL) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=err,
                            start_new_session=True)


def test_watch_kills_on_host_memory_and_time_limits(tmp_path: Path) -> None:
    hog = _spawn("import time; x = bytearray(400 * 2**20); x[::4096] = b'1' * len(x[::4096]); time.sleep(60)")
    assert watch(hog, timeout_s=50, host_memory_bytes=150 * 2**20)[0] == "host_memory"
    assert hog.returncode is not None and hog.returncode < 0
    sleeper = _spawn("import time; time.sleep(60)")
    assert watch(sleeper, timeout_s=1.0, host_memory_bytes=0)[0] == "timeout"
    with (tmp_path / "err").open("w+b") as err:
        quick = _spawn("import sys; sys.stderr.write('bye'); sys.exit(4)", err)
        outcome, said = watch(quick, timeout_s=30, host_memory_bytes=150 * 2**20, err=err)
    assert (outcome, said, quick.returncode) == ("exited", b"bye", 4)


def test_watch_counts_the_pids_it_is_told_of() -> None:
    """A runner the fork server started is no descendant of its judge: its memory counts all the same."""
    hog = _spawn("import time; x = bytearray(400 * 2**20); x[::4096] = b'1' * len(x[::4096]); time.sleep(60)")
    judge = _spawn("import time; time.sleep(60)")
    try:
        assert watch(judge, timeout_s=50, host_memory_bytes=150 * 2**20, also=lambda: [hog.pid])[0] == "host_memory"
        assert hog.wait(timeout=10) < 0  # killed with it
    finally:
        hog.kill()


def test_worker_kernel_names_see_launch_bounds_after_the_return_type(tmp_path: Path) -> None:
    """The profiler share counts kernels by these names: `void __launch_bounds__(256) k` is `k`."""
    from kernelwright.verifier.profiling import candidate_kernel_names

    src = tmp_path / "c.py"
    src.write_text('cuda = """\n__global__ void __launch_bounds__(256) k(float* x) {}\n'
                   '__global__ __launch_bounds__(128, 2) void k2(int n) {}\n"""\n')
    assert candidate_kernel_names(src) == {"k", "k2"}


def test_progress_accumulates_seconds_per_phase(tmp_path: Path) -> None:
    from kernelwright.verifier.spec import Progress

    progress = Progress(tmp_path / "state.json")
    for phase in ("compile", "timing", "compile", "done"):
        progress.write(phase=phase)
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["phase"] == "done"
    assert set(state["phase_s"]) == {"start", "compile", "timing"}
    assert all(v >= 0.0 for v in state["phase_s"].values())


def test_progress_splits_cpu_seconds_per_phase_between_judge_and_runner(tmp_path: Path) -> None:
    from kernelwright.verifier.spec import Progress

    runner = iter([1.5, 4.0, 0.0, 6.0])  # the runner's CPU so far at each switch (0.0: gone, then back)
    progress = Progress(tmp_path / "state.json")
    progress.write(phase="start_runner")
    progress.runner_cpu = lambda: next(runner)
    busy_until = time.process_time() + 0.05
    for phase in ("compile", "correctness", "timing", "finish"):
        while time.process_time() < busy_until:  # the judge's own CPU, counted in the phase it is spent in
            pass
        progress.write(phase=phase)
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["runner_phase_cpu_s"] == {"start_runner": 1.5, "compile": 2.5, "timing": 2.0}
    assert state["judge_phase_cpu_s"]["start_runner"] >= 0.05
    assert set(state["judge_phase_cpu_s"]) == set(state["phase_s"]) == {"start", "start_runner", "compile",
                                                                         "correctness", "timing"}


def test_worker_verdict_carries_its_phase_seconds(tmp_path: Path) -> None:
    """Whatever the worker ends with, the verdict says where its time went (worker_wall: the process)."""
    from kernelwright.verifier.verify import make_spec, run_worker

    spec = make_spec(_cfg("honest_affine.py", build_cache=str(tmp_path / "builds")))
    verdict = run_worker(spec, timeout_s=120.0)
    assert verdict.phase_s["worker_wall"] > 0.0
    assert "load_problem" in verdict.phase_s or "start" in verdict.phase_s


def test_median_phase_seconds_over_the_verdicts_that_had_the_phase() -> None:
    from kernelwright.verifier.verdict import median_phase_s

    a = Verdict.of("ok", build="split", phase_s={"compile": 8.0, "timing": 1.0, "worker_wall": 12.0})
    b = Verdict.of("ok", phase_s={"compile": 2.0, "worker_wall": 4.0})
    c = Verdict.of("timeout", phase_s={"compile": 5.0, "timing": 3.0, "worker_wall": 9.0})
    assert median_phase_s([a, b, c]) == {"compile": 5.0, "timing": 2.0, "worker_wall": 9.0}
    assert a.brief() == "ok (split, worker 12 s)"


def _torch_wrapper(tmp_path: Path) -> VerifyConfig:
    """honest_affine.py with a host wrapper that launches its kernel but returns PyTorch's answer."""
    source = (FIXTURES / "candidates" / "honest_affine.py").read_text()
    cheat = source.replace("    return y;\n", "    return at::add(at::mul(xc, 2.0), 1.0);\n")
    assert cheat != source
    path = tmp_path / "torch_wrapper.py"
    path.write_text(cheat)
    return VerifyConfig(problem=_cfg("honest_affine.py").problem, candidate=str(path))


TORCH_WARNING = "host code calls PyTorch compute: at::add (line 20), at::mul (line 20)"


def test_verify_static_warns_of_torch_compute_in_the_host_code(tmp_path: Path, capsys) -> None:
    """A warning, not a rejection: on a GPU the run-time custom-kernel share decides."""
    cfg = _torch_wrapper(tmp_path)
    out = tmp_path / "v.json"
    assert main(["verify", "--problem", cfg.problem, "--candidate", cfg.candidate, "--static", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["reason"] == "static_ok" and data["warnings"] == [TORCH_WARNING]
    assert "warning:" in capsys.readouterr().err
    honest = _cfg("honest_affine.py", static=True)
    assert verify_one(honest).warnings == []
    partial = Path(cfg.candidate).read_text().replace("return _ext.run(x)", "return torch.relu(_ext.run(x))")
    assert static_verdict(partial) is None
    assert source_warnings(partial) == ["ModelNew calls PyTorch compute: torch.relu (line 30)", TORCH_WARNING]


def test_the_warning_is_on_the_worker_verdict_too(tmp_path: Path) -> None:
    cfg = _torch_wrapper(tmp_path)
    cfg.build_cache, cfg.timeout_s = str(tmp_path / "builds"), 120.0
    seen: list[Verdict] = []
    verdict = verify_many([cfg], jobs=1, on_done=lambda _c, v: seen.append(v))[0]
    assert verdict.warnings == [TORCH_WARNING] and seen == [verdict]


def test_verdict_warnings_round_trip_and_older_json_loads() -> None:
    v = Verdict.of("ok", "fine", warnings=["host code calls PyTorch compute: at::mm (line 3)"])
    assert Verdict.from_json(v.to_json()) == v
    old = Verdict.of("wrong_output", "off").to_json()
    del old["warnings"]
    assert Verdict.from_json(old).warnings == []


def test_verify_static_warns_of_pytorch_compute_in_model_new(tmp_path: Path) -> None:
    """The static fallback_torch_op finding is a warning in verify: the GPU run's share decides."""
    assert WARNED_STATIC_REASONS == {"fallback_torch_op"}
    verdict = verify_one(_cfg("fallback_torch_op.py", static=True))
    assert (verdict.status, verdict.reason, verdict.static_only) == ("correct", "static_ok", True)
    assert verdict.warnings == [EXPECTED["fallback_torch_op.py"]["warning"]]
    cfg = _cfg("fallback_torch_op.py")
    out = tmp_path / "v.json"
    assert main(["verify", "--problem", cfg.problem, "--candidate", cfg.candidate, "--static", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["warnings"] == verdict.warnings


def test_static_verdict_still_rejects_a_try_except_fallback_and_warns_of_its_torch_ops() -> None:
    source = (FIXTURES / "candidates" / "honest_affine.py").read_text()
    guarded = "        try:\n            return _ext.run(x)\n        except Exception:\n            return torch.abs(x)"
    both = source.replace("        return _ext.run(x)", guarded)
    assert both != source
    rejected = static_verdict(both)
    assert rejected is not None and (rejected.status, rejected.reason) == ("rejected", "fallback_try_except")
    assert rejected.detail == "line 30: try/except in ModelNew"
    assert rejected.warnings == ["ModelNew calls PyTorch compute: torch.abs (line 33)"]
    tampering = source.replace("class ModelNew", "torch.mean = torch.sum\n\n\nclass ModelNew")
    assert (static_verdict(tampering) or Verdict.of("ok")).reason == "harness_tampering"


def test_make_spec_carries_the_custom_share_threshold() -> None:
    """Under 10% of the device time in the candidate's own kernels: fallback_runtime (worker.py)."""
    from kernelwright.verifier.spec import Spec

    cfg = _cfg("honest_affine.py")
    assert cfg.min_custom_share == 0.1 and make_spec(cfg).min_custom_share == 0.1
    assert Spec(problem="p", candidate="c", result="r").min_custom_share == 0.1
    cfg.min_custom_share = 0.0
    assert make_spec(cfg).min_custom_share == 0.0


def test_a_candidate_file_gone_after_the_static_checks_gets_a_verdict_not_the_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file removed between the static checks and the worker (a cleaned folder, a copied tree) is that
    candidate's `exception`, with its path; the other candidates keep their verdicts."""
    import shutil

    from kernelwright.verifier import verify

    kept, gone = tmp_path / "kept.py", tmp_path / "gone.py"
    shutil.copy(FIXTURES / "candidates" / "honest_affine.py", kept)
    shutil.copy(FIXTURES / "candidates" / "honest_affine.py", gone)
    real_pre_check = verify._pre_check

    def pre_check_then_remove(cfg: VerifyConfig) -> Verdict | None:
        verdict = real_pre_check(cfg)
        if cfg.candidate == str(gone):
            gone.unlink()
        return verdict

    monkeypatch.setattr(verify, "_pre_check", pre_check_then_remove)
    monkeypatch.setattr(verify, "run_worker", lambda spec, *a, **k: Verdict.of("ok", "ran"))
    problem = str(FIXTURES / "problems" / EXPECTED["honest_affine.py"]["problem"])
    verdicts = verify_many([VerifyConfig(problem=problem, candidate=str(c)) for c in (kept, gone)], jobs=2)
    assert [v.reason for v in verdicts] == ["ok", "exception"]
    assert str(gone) in verdicts[1].detail and verdicts[1].judge_version
