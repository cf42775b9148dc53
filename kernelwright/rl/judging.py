"""The judges the RL reward asks: the GPU judge, or static checks and NVRTC on a machine without a GPU.

    judge = pick_judge(cfg)            # gpu_judge with a CUDA device (or --reward-mode), else nvrtc_static
    verdicts = judge([JudgeItem(problem=Path("p.py"), candidate=Path("c.py"))])

- `gpu_judge`: `verify_many`, the whole protocol (static checks, NVRTC gate, build, correctness on
  every shape and seed, timing with the custom-kernel share, the recheck), `verify_jobs` at a time.
  Timing stays on even with --correctness-only: the fallback_runtime and result_caching checks are
  part of the timed runs.
- `nvrtc_static`: every static check (PyTorch compute in ModelNew included: with no run there is no
  kernel share to clear it, so it is a rejection here, as in curation), then the compile check a CPU
  can run, as the evaluation's compile rate counts it there: NVRTC on the device code and the host
  stage on the rest (the launcher, the bindings). Passing all gives the verdict `no_gpu` (the compile
  part of the reward, nothing more); a failed stage is `compile_error`. NVRTC alone never sees host
  code: an infill task's launch configuration is host code, so any answer to it would earn the
  compile reward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from kernelwright.cuda.compile_check import check_many
from kernelwright.cuda.compile_result import OK, UNAVAILABLE, CompileCheckSettings, CompileResult
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
    return nvrtc_static_judge(CompileCheckSettings(workers=cfg.verify_jobs))


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
            if result.host.status == UNAVAILABLE:
                raise UsageError("the nvrtc_static reward needs the host compile check (g++ and torch's headers), "
                                 f"which does not run here: {result.host.log[:300]}")
            verdicts[i] = compile_verdict(result)
        return [v for v in verdicts if v is not None]

    return judge


def compile_verdict(result: CompileResult) -> Verdict:
    """`no_gpu` when every stage that ran compiled, else `compile_error` with the failed stage's log."""
    if result.ok:
        stages = "NVRTC and the host compile" if result.host.status == OK else "NVRTC"
        return Verdict.of("no_gpu", f"static checks and {stages} passed; not run (no GPU judge)")
    if result.device.status != OK:
        return Verdict.of("compile_error", f"NVRTC: {result.device.log[:2000]}")
    return Verdict.of("compile_error", f"host compile: {result.host.log[:2000]}")
