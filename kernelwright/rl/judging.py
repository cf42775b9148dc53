"""The judges the RL reward asks: the GPU judge, or static checks and NVRTC on a machine without a GPU.

    judge = pick_judge(cfg)            # gpu_judge with a CUDA device (or --reward-mode), else nvrtc_static
    verdicts = judge([JudgeItem(problem=Path("p.py"), candidate=Path("c.py"))])

- `gpu_judge`: `verify_many`, the whole protocol (static checks, NVRTC gate, build, correctness on
  every shape and seed, timing with the custom-kernel share, the recheck), `verify_jobs` at a time.
  Timing stays on even with --correctness-only: the fallback_runtime and result_caching checks are
  part of the timed runs.
- `nvrtc_static`: every static check (PyTorch compute in ModelNew included: with no run there is no
  kernel share to clear it, so it is a rejection here, as in curation), then NVRTC on the device
  code. Passing both gives the verdict `no_gpu` (the compile part of the reward, nothing more);
  NVRTC's rejection is `compile_error`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from kernelwright.cuda.compile_check import check_many
from kernelwright.cuda.compile_result import OK, UNAVAILABLE, CompileCheckSettings
from kernelwright.cuda.static_checks import check_source
from kernelwright.errors import NoCudaDevice, UsageError
from kernelwright.pysource import compile_python, syntax_message
from kernelwright.rl.config import RLConfig
from kernelwright.rl.reward import CHEAT_REASONS
from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.verdict import Verdict
from kernelwright.verifier.verify import cuda_available, verify_many

GPU_JUDGE, NVRTC_STATIC = "gpu_judge", "nvrtc_static"


@dataclass(frozen=True)
class JudgeItem:
    problem: Path  # the problem file (the reference)
    candidate: Path  # the candidate file (for infill: the partial with the completion spliced in)


Judge = Callable[[Sequence[JudgeItem]], list[Verdict]]


def reward_mode(cfg: RLConfig) -> str:
    """The judge this run's reward uses: gpu_judge or nvrtc_static (auto: by whether CUDA is here)."""
    if cfg.reward_mode != "auto":
        return cfg.reward_mode
    return GPU_JUDGE if cuda_available() else NVRTC_STATIC


def pick_judge(cfg: RLConfig) -> Judge:
    mode = reward_mode(cfg)
    if mode == GPU_JUDGE:
        if not cuda_available():
            raise NoCudaDevice("--reward-mode gpu_judge needs a CUDA device: use nvrtc_static (or auto) here")
        return gpu_judge(rl_verify_config(cfg), cfg.verify_jobs)
    return nvrtc_static_judge(CompileCheckSettings(host=False, workers=cfg.verify_jobs))


def rl_verify_config(cfg: RLConfig) -> VerifyConfig:
    """The judge's protocol for RL candidates: the defaults, the run's time limit and timing budget, no
    torch.compile baseline (the speedup is over the eager reference either way)."""
    return VerifyConfig(timeout_s=cfg.verify_timeout_s, timing_budget_s=cfg.timing_budget_s, compile_baseline=False)


def gpu_judge(base: VerifyConfig, jobs: int) -> Judge:
    def judge(items: Sequence[JudgeItem]) -> list[Verdict]:
        # a candidate that is not Python is a syntax_error here (verify_many would call it bad input)
        verdicts = [syntax_verdict(it.candidate.read_text(encoding="utf-8", errors="replace")) for it in items]
        todo = [i for i, v in enumerate(verdicts) if v is None]
        cfgs = [replace(base, problem=str(items[i].problem), candidate=str(items[i].candidate), json=None,
                        static=False) for i in todo]
        for i, verdict in zip(todo, verify_many(cfgs, jobs), strict=True):
            verdicts[i] = verdict
        return [v for v in verdicts if v is not None]

    return judge


def syntax_verdict(source: str) -> Verdict | None:
    try:
        compile_python(source, "candidate.py")
    except SyntaxError as exc:
        return Verdict.of("syntax_error", syntax_message(exc))
    return None


def static_rejection(source: str) -> Verdict | None:
    """A reason of the static checks, PyTorch compute in ModelNew included (a cheat reason before any other);
    None when all pass."""
    report = check_source(source)
    if not report.reasons:
        return None
    reason = next((r for r in report.reasons if r in CHEAT_REASONS), report.reasons[0])
    return Verdict.of(reason, "; ".join(report.by_reason[reason])[:2000])


def nvrtc_static_judge(settings: CompileCheckSettings) -> Judge:
    def judge(items: Sequence[JudgeItem]) -> list[Verdict]:
        sources = [it.candidate.read_text(encoding="utf-8", errors="replace") for it in items]
        verdicts: list[Verdict | None] = [static_rejection(s) for s in sources]
        todo = [i for i, v in enumerate(verdicts) if v is None]
        for i, result in zip(todo, check_many([sources[i] for i in todo], settings), strict=True):
            if result.device.status == UNAVAILABLE:
                raise UsageError(f"the nvrtc_static reward needs NVRTC, which does not load here: {result.device.log}")
            verdicts[i] = (Verdict.of("no_gpu", "static checks and NVRTC passed; not run (no GPU judge)")
                           if result.device.status == OK else
                           Verdict.of("compile_error", f"NVRTC: {result.device.log[:2000]}"))
        return [v for v in verdicts if v is not None]

    return judge
