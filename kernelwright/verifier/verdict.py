"""What a verification says: a status, one documented reason code, and the measured figures.

Times are milliseconds (`*_ms`) or seconds (`*_s`), never mixed; ratios are computed from the
unrounded medians.

Reason codes (one per cheat class of docs/verification.md and per failure kind):

| reason | status | meaning |
| --- | --- | --- |
| ok | correct | matched the reference on every shape, seed and input distribution |
| syntax_error | rejected | the candidate is not valid Python |
| no_model_new | rejected | no `ModelNew` class |
| no_kernel | rejected | no `__global__` kernel built and launched |
| fallback_try_except | rejected | class 1: try/except around the custom path or its build; a missing build's own path |
| fallback_torch_op | rejected | class 1: PyTorch compute ops in ModelNew (a curation filter; `verify` warns) |
| fallback_runtime | rejected | class 1: under 10% of GPU kernel time in the candidate's own kernels |
| fallback_decoy | rejected | class 1: the output is still right with the candidate's own kernel launches skipped |
| unwritten_output | rejected | class 2: output elements never written (poisoned memory shows through) |
| input_independent | rejected | class 3: right on the default inputs only (constant, near-zero or identity output) |
| input_mutation | rejected | class 4: the forward changed its inputs in place |
| async_escape | rejected | class 5: work on a side stream or a new thread |
| result_caching | rejected | class 6: a new input returned the previous input's result |
| harness_tampering | rejected | class 7: timers, events or harness functions replaced |
| non_tensor_output | rejected | class 7: output is not a plain torch.Tensor with real storage |
| precision_downgrade | rejected | class 8: wrong dtype, or error only within a lower precision's tolerance |
| launch_error | rejected | class 9: a kernel launch failed (CUDA error left pending) |
| wrong_output | incorrect | outputs differ from the reference beyond tolerance |
| approximation | incorrect | an approximation of the function (tanh-GELU for GELU), no lower-precision arithmetic |
| shape_mismatch | incorrect | output shape differs |
| compile_error | compile_error | a build failed, at import or later (its stage, first error); NVRTC rejected it |
| illegal_memory_access | runtime_error | CUDA illegal address / misaligned access |
| out_of_memory | runtime_error | the GPU (or host) memory limit was hit |
| exception | runtime_error | the forward raised |
| crash | runtime_error | the worker process died on a signal |
| exit_called | runtime_error | the worker process exited before reporting (os._exit, sys.exit) |
| timeout | timeout | over the time limit |
| problem_input_independent | rejected | the problem itself does not depend on its input: cannot verify |
| no_candidate | compile_error | `evaluate` only: no candidate file for this problem and sample |
| no_gpu | not_verified | `evaluate` only: static checks and NVRTC passed; no GPU here, so never run |
| timed_output_mismatch | rejected | class 10: a timed call's output is wrong although the correctness runs passed |
| timing_inconsistent | rejected | class 10: the timer below what the judge's clock allows, every attempt (patched) |
| malformed_report | runtime_error | the worker's report is not a verdict this judge writes (unknown keys, bad types) |

A verdict records the judge that reached it (`judge_version`: bump `JUDGE_VERSION` whenever the
protocol can change a verdict or a figure) and the correctness seeds it drew with (`seeds`), so
it can be reproduced; figures are comparable only within one judge version. `tolerance_rule` names
the rule(s) that judged correctness (`fp64_relative`, `fp32_allclose` or `exact`:
kernelwright/verifier/tolerance.py), on the verdict and per shape. The worker's report
is untrusted data: `parse_report` accepts exactly the fields written here, with their types, and
raises `MalformedReport` otherwise, which the caller turns into a `malformed_report` verdict.

The KernelBench view (`kb_correct`, `kb_speedup`: verifier/kb_view.py) judges the same draws by
KernelBench's tolerance (allclose, atol = rtol = 1e-2) with every other check unchanged; a
candidate it accepts that the strict rule rejects is still timed, and keeps its strict reason.
`speedup` is the strict view's: only on correct verdicts.

`warnings` are notes that leave the status as it is: e.g. the candidate's C++/CUDA host code calls
PyTorch compute (`at::matmul`, `x.sum()`), which on a GPU the run-time custom-kernel share judges.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

JUDGE_VERSION = "23"  # 23: the judge's clock ends its rounds once the timer reads within its bound, not
# disturbed (early_stop_clock on): a later round could only lower the estimate, which rejects nothing more;
# 22: the runner holds the timed trials' outputs with their sums and the judge
# reads back the 8 it chooses (held_timed_outputs on): fewer outputs written and read under the lock;
# 21: inputs are made on the GPU with CUDA's generator (other numbers than the
# host's: every draw changes), not on the host and copied;
# 20: each round of the judge's clock takes its cost per call (no-op batch, the
# judge's own draws) beside its batch, so other processes' time slices weigh on both alike;
# 19: the generic bindings' object also builds against pybind11 3.0.1 (torch 2.11), where
# g++ had rejected it and every split build read the slim header (`split_slim`, not `split_bare`);
# 18: the generic bindings also convert tensor lists, int lists and optional
# int64_t/double parameters (more candidates build `split_bare`);
# 17: a split build's host file whose functions the generic bindings convert
# is built after a precompiled torch/types.h alone, its bindings linked in from an object built once
# (cuda/host_bindings.py; verdict build `split_bare`): no pybind11 in the candidate's file;
# 16: the timed outputs are checked after the timing lock, not under it (their
# forwards share the GPU with others' trials, as correctness runs do; the lock is held less);
# 15: the kernel share's profiler session reads one element of the output back before it
# stops (a candidate that replaced the synchronisations natively could stop it before its kernels
# ended: a share of 0, fallback_runtime, in one run of three); that copy is not counted;
# 14: a cupy RawKernel built under another name (an alias, a partial, getattr) launches its
# kernel by name when called, as one built under its own name does (was "defined but never launched");
# 13: an approximation's error is at most 0.2% of the norm (was 0.5%): an op near the
# identity where the output lies (mish around a row max) is another function;
# 12: a build through getattr, a name assigned the builder, a partial or a module alias
# is a build; getattr with a literal name reads as the attribute everywhere (torch ops, tampering); ModelNew made
# by a factory function or type() of the file is checked as ModelNew;
# 11: a systematic error above 0.5% of the norm is a wrong output, not an approximation;
# a precision downgrade (a cheat class) needs an output large enough to read its error's shape (128 elements);
# 10: a build handed to an executor or thread, or through an imported alias, is a build;
# ModelNew bound to a class of the file, and the file's base classes of ModelNew, checked as ModelNew;
# `except*` and contextlib.suppress swallow like try/except; a helper that swallows a failed call of the built
# extension is a fallback;
# sources past 16 MiB refused unread; 9: the profiler's kernel time bounds the timer (kernel_clock.py);
# 8: element bounds per element and fan-in, approximation, the KernelBench view;
# failed builds named (their stage, lazy ones too), no build after NVRTC's trusted rejection, build fallbacks;
# 7: the judge's clock bounds the timer (2x), GPU memory admission; 6: a line left by a gone runner, threads
# checked before timing; 5: the decoy check

REASON_STATUS: dict[str, str] = {
    "ok": "correct",
    "syntax_error": "rejected",
    "no_model_new": "rejected",
    "no_kernel": "rejected",
    "fallback_try_except": "rejected",
    "fallback_torch_op": "rejected",
    "fallback_runtime": "rejected",
    "fallback_decoy": "rejected",
    "unwritten_output": "rejected",
    "input_independent": "rejected",
    "input_mutation": "rejected",
    "async_escape": "rejected",
    "result_caching": "rejected",
    "harness_tampering": "rejected",
    "non_tensor_output": "rejected",
    "precision_downgrade": "rejected",
    "launch_error": "rejected",
    "wrong_output": "incorrect",
    "approximation": "incorrect",
    "shape_mismatch": "incorrect",
    "compile_error": "compile_error",
    "illegal_memory_access": "runtime_error",
    "out_of_memory": "runtime_error",
    "exception": "runtime_error",
    "crash": "runtime_error",
    "exit_called": "runtime_error",
    "timeout": "timeout",
    "problem_input_independent": "rejected",
    "no_candidate": "compile_error",
    "no_gpu": "not_verified",
    "malformed_report": "runtime_error",
    "timed_output_mismatch": "rejected",
    "timing_inconsistent": "rejected",
}


@dataclass
class ShapeResult:
    shape: dict[str, Any]
    correct: bool
    max_abs_err: float | None = None
    runtime_ms: float | None = None
    ref_runtime_ms: float | None = None
    ref_compile_runtime_ms: float | None = None
    speedup: float | None = None
    roofline_share: float | None = None
    custom_kernel_time_share: float | None = None
    custom_kernel_time_share_spread: float | None = None  # max - min over the share's passes (None: one pass)
    tolerance_rule: str = ""  # the rule(s) that judged its draws, comma-separated (verifier/tolerance.py)
    wall_runtime_ms: float | None = None  # the judge's wall-clock estimate of one call, beside runtime_ms
    timing_disturbed: bool = False  # other work on the GPU disturbed every timing attempt of this shape
    kernel_runtime_ms: float | None = None  # the profiler's GPU kernel time per call (CUPTI), beside runtime_ms


@dataclass
class Verdict:
    status: str
    reason: str
    detail: str = ""
    compile_s: float | None = None
    runtime_ms: float | None = None
    ref_runtime_ms: float | None = None
    ref_compile_runtime_ms: float | None = None
    speedup: float | None = None
    roofline_share: float | None = None
    custom_kernel_time_share: float | None = None
    per_shape: list[ShapeResult] = field(default_factory=list)
    static_only: bool = False
    build: str | None = None  # how the candidate's extension(s) were built: split, slim or as_written
    phase_s: dict[str, float] = field(default_factory=dict)  # seconds per worker phase; worker_wall: the process
    warnings: list[str] = field(default_factory=list)  # one line each; they never change the status
    judge_version: str = ""  # the JUDGE_VERSION that reached it (set by the judge, not by the worker)
    seeds: list[int] = field(default_factory=list)  # correctness seeds drawn, per input distribution
    timing_seed: int | None = None  # first seed of the timed calls' fresh inputs (drawn by the judge)
    tolerance_rule: str = ""  # the rule(s) that judged correctness, comma-separated (verifier/tolerance.py)
    cpu_s: dict[str, float] = field(default_factory=dict)  # CPU seconds: judge, runner (its compilers included)
    judge_phase_cpu_s: dict[str, float] = field(default_factory=dict)  # the judge's CPU seconds per phase of phase_s
    runner_phase_cpu_s: dict[str, float] = field(default_factory=dict)  # the runner's (compilers included), same phases
    isolation: str | None = None  # what confined the candidate's runner (user, landlock), as the judge set it up
    contention: list[str] = field(default_factory=list)  # figures taken while others held the GPU, a line each
    kb_correct: bool | None = None  # KernelBench's tolerance held on every draw, every other check passed
    kb_speedup: float | None = None  # the speedup the KernelBench view counts (where kb_correct)

    @classmethod
    def of(cls, reason: str, detail: str = "", **kw: Any) -> Verdict:
        return cls(status=REASON_STATUS[reason], reason=reason, detail=detail, **kw)

    @property
    def correct(self) -> bool:
        return self.status == "correct"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def brief(self) -> str:
        """One line for progress output: reason, how it was built, the worker's seconds."""
        return f"{self.reason} ({self.build}, worker {self.phase_s.get('worker_wall', 0.0):.0f} s)"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict:
        """A verdict from its JSON form (see `parse_report`: anything else raises MalformedReport)."""
        return parse_report(data)


class MalformedReport(ValueError):
    """A worker report that is not a verdict this judge writes."""


_NUMBER = (int, float)


def _checked(cls: type, data: Any, where: str) -> dict[str, Any]:
    """`data` as keyword arguments of the dataclass `cls`: known keys only, each of its declared kind."""
    if not isinstance(data, Mapping):
        raise MalformedReport(f"{where}: not an object")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise MalformedReport(f"{where}: unknown keys {', '.join(map(str, unknown))[:200]}")
    for key, value in data.items():
        _check_value(f"{where}.{key}", str(known[key].type), value)
    return dict(data)


def _check_value(where: str, declared: str, value: Any) -> None:
    if value is None and "None" in declared:
        return
    if declared.startswith("float") or declared.startswith("int"):
        ok = isinstance(value, _NUMBER) and not isinstance(value, bool) and math.isfinite(value)
    elif declared.startswith("str"):
        ok = isinstance(value, str)
    elif declared.startswith("bool"):
        ok = isinstance(value, bool)
    elif declared.startswith("dict[str, float]"):
        ok = isinstance(value, dict) and all(isinstance(v, _NUMBER) and math.isfinite(v) for v in value.values())
    elif declared.startswith("list[str]"):
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    elif declared.startswith("list[int]"):
        ok = isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    else:  # dict[str, Any], list[ShapeResult]: checked by their own parser
        ok = isinstance(value, dict | list)
    if not ok:
        raise MalformedReport(f"{where}: {type(value).__name__} where {declared} belongs")


def parse_report(data: Any) -> Verdict:
    """The verdict in a worker's report, checked field by field; MalformedReport otherwise."""
    kwargs = _checked(Verdict, data, "verdict")
    for key in ("status", "reason"):
        if key not in kwargs:
            raise MalformedReport(f"verdict: no {key}")
    if REASON_STATUS.get(kwargs["reason"]) != kwargs["status"]:
        raise MalformedReport(f"verdict: status {kwargs['status']!r} does not go with reason {kwargs['reason']!r}")
    try:
        kwargs["per_shape"] = [ShapeResult(**_checked(ShapeResult, s, "per_shape"))
                               for s in kwargs.pop("per_shape", [])]
        return Verdict(**kwargs)
    except TypeError as exc:  # a required field missing
        raise MalformedReport(f"verdict: {exc}") from None


def median_per_key(maps: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Per key, the median of its values over the maps that have it (keys sorted)."""
    keys = sorted({k for m in maps for k in m})
    return {k: statistics.median(m[k] for m in maps if k in m) for k in keys}


def median_phase_cpu_s(verdicts: Sequence[Verdict]) -> dict[str, dict[str, float]]:
    """Per process (judge, runner) and phase, the median CPU seconds over the verdicts that have it."""
    return {"judge": median_per_key([v.judge_phase_cpu_s for v in verdicts]),
            "runner": median_per_key([v.runner_phase_cpu_s for v in verdicts])}


def median_phase_s(verdicts: Sequence[Verdict]) -> dict[str, float]:
    """Per worker phase, the median seconds over the verdicts that went through it."""
    return median_per_key([v.phase_s for v in verdicts])
