"""The judges of the RL reward on a machine without a GPU: static checks and NVRTC, and the reward mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.cuda.compile_result import CompileCheckSettings
from kernelwright.errors import NoCudaDevice, UsageError
from kernelwright.rl import judging
from kernelwright.rl.config import RLConfig
from kernelwright.rl.judging import JudgeItem, gpu_judge, nvrtc_static_judge, pick_judge, reward_mode
from kernelwright.rl.reward import RewardWeights, is_cheat, reward_parts
from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.verdict import Verdict

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "verify"
CANDIDATES = FIXTURES / "candidates"


def _items(tmp_path: Path, sources: dict[str, str]) -> list[JudgeItem]:
    items = []
    for name, source in sources.items():
        (tmp_path / f"{name}.py").write_text(source)
        items.append(JudgeItem(problem=FIXTURES / "problems" / "affine.py", candidate=tmp_path / f"{name}.py"))
    return items


def test_nvrtc_static_gives_the_compile_part_only_and_rejects_cheats(tmp_path: Path) -> None:
    honest = (CANDIDATES / "honest_affine.py").read_text()
    sources = {"honest": honest,
               "broken": honest.replace("y[i] = 2.0f * x[i] + 1.0f;", "y[i] = 2.0f * undeclared[i];"),
               "try_except": (CANDIDATES / "fallback_try_except.py").read_text(),
               "torch_op": (CANDIDATES / "fallback_torch_op.py").read_text(),
               "not_python": "class ModelNew(:\n"}
    judge = nvrtc_static_judge(CompileCheckSettings(host=False, workers=2, cache_dir=tmp_path / "cache"))
    verdicts = dict(zip(sources, judge(_items(tmp_path, sources)), strict=True))
    assert {k: v.reason for k, v in verdicts.items()} == {
        "honest": "no_gpu", "broken": "compile_error", "try_except": "fallback_try_except",
        "torch_op": "fallback_torch_op", "not_python": "syntax_error"}
    rewards = {k: reward_parts(v, RewardWeights()).total for k, v in verdicts.items()}
    assert rewards == {"honest": 0.2, "broken": 0.0, "try_except": 0.0, "torch_op": 0.0, "not_python": 0.0}
    assert is_cheat(verdicts["try_except"]) and is_cheat(verdicts["torch_op"])


def test_nvrtc_static_checks_the_host_code_an_infill_answer_may_be(tmp_path: Path) -> None:
    """A launch configuration is host code, which NVRTC never sees: judged on the device code alone, a broken
    launcher would earn the compile reward."""
    honest = (CANDIDATES / "honest_affine.py").read_text()
    launch = "honest_affine_kernel<<<(unsigned)((n + 255) / 256), 256>>>"
    assert launch in honest
    sources = {"honest": honest,
               "bad_launch": honest.replace(launch, "honest_affine_kernel<<<(unsigned)(blocks), 256>>>")}
    judge = nvrtc_static_judge(CompileCheckSettings(workers=2, cache_dir=tmp_path / "cache"))
    verdicts = judge(_items(tmp_path, sources))
    assert [(v.reason, v.detail.split(":")[0]) for v in verdicts] == [
        ("no_gpu", "static checks and NVRTC and the host compile passed; not run (no GPU judge)"),
        ("compile_error", "host compile")]
    assert "blocks" in verdicts[1].detail
    device_only = nvrtc_static_judge(CompileCheckSettings(host=False, workers=2, cache_dir=tmp_path / "cache"))
    assert [v.reason for v in device_only(_items(tmp_path, sources))] == ["no_gpu", "no_gpu"]  # what it missed


def test_the_gpu_judge_calls_unparsable_candidates_syntax_errors_itself(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def fake_verify_many(cfgs: list[VerifyConfig], jobs: int) -> list[Verdict]:
        seen.extend(Path(c.candidate).name for c in cfgs)
        assert jobs == 3 and all(c.timeout_s == 60 and c.timing for c in cfgs)
        return [Verdict.of("ok") for _ in cfgs]

    monkeypatch.setattr(judging, "verify_many", fake_verify_many)
    items = _items(tmp_path, {"a": "x = 1\n", "b": "def (\n", "c": "y = 2\n"})
    verdicts = gpu_judge(VerifyConfig(timeout_s=60), 3)(items)
    assert [v.reason for v in verdicts] == ["ok", "syntax_error", "ok"] and seen == ["a.py", "c.py"]


def test_the_reward_mode_follows_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judging, "cuda_available", lambda: False)
    assert reward_mode(RLConfig()) == "nvrtc_static"
    assert reward_mode(RLConfig(reward_mode="gpu_judge")) == "gpu_judge"
    with pytest.raises(NoCudaDevice):
        pick_judge(RLConfig(reward_mode="gpu_judge"))
    monkeypatch.setattr(judging, "cuda_available", lambda: True)
    assert reward_mode(RLConfig()) == "gpu_judge"


def test_the_gpu_judge_times_with_the_runs_budget_and_no_compile_baseline() -> None:
    """Every candidate's timing holds the judge's timing lock: RL times with its own, shorter budget."""
    cfg = judging.rl_verify_config(RLConfig(verify_timeout_s=120.0))
    assert (cfg.timing_budget_s, cfg.timeout_s, cfg.compile_baseline) == (0.25, 120.0, False)
    assert judging.rl_verify_config(RLConfig(timing_budget_s=1.0)).timing_budget_s == 1.0
    for bad in (-0.1, float("nan")):
        with pytest.raises(UsageError, match="timing_budget_s"):
            RLConfig(timing_budget_s=bad)
