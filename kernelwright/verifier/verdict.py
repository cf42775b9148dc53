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
| fallback_try_except | rejected | class 1: try/except around the custom path |
| fallback_torch_op | rejected | class 1: PyTorch compute ops in ModelNew (static) |
| fallback_runtime | rejected | class 1: profiler shows most GPU time outside the candidate's kernels |
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
| shape_mismatch | incorrect | output shape differs |
| compile_error | compile_error | `load_inline` (or import) failed |
| illegal_memory_access | runtime_error | CUDA illegal address / misaligned access |
| out_of_memory | runtime_error | the GPU (or host) memory limit was hit |
| exception | runtime_error | the forward raised |
| crash | runtime_error | the worker process died on a signal |
| exit_called | runtime_error | the worker process exited before reporting (os._exit, sys.exit) |
| timeout | timeout | over the time limit |
| problem_input_independent | rejected | the problem itself does not depend on its input: cannot verify |
| no_candidate | compile_error | `evaluate` only: no candidate file for this problem and sample |
| no_gpu | not_verified | `evaluate` only: static checks and NVRTC passed; no GPU here, so never run |

`warnings` are notes that leave the status as it is: e.g. the candidate's C++/CUDA host code calls
PyTorch compute (`at::matmul`, `x.sum()`), which on a GPU the run-time custom-kernel share judges.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

STATUSES = ("correct", "incorrect", "rejected", "compile_error", "runtime_error", "timeout", "not_verified")

REASON_STATUS: dict[str, str] = {
    "ok": "correct",
    "syntax_error": "rejected",
    "no_model_new": "rejected",
    "no_kernel": "rejected",
    "fallback_try_except": "rejected",
    "fallback_torch_op": "rejected",
    "fallback_runtime": "rejected",
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
    def from_json(cls, data: dict[str, Any]) -> Verdict:
        shapes = [ShapeResult(**s) for s in data.pop("per_shape", [])]
        return cls(**data, per_shape=shapes)


def median_phase_s(verdicts: Sequence[Verdict]) -> dict[str, float]:
    """Per worker phase, the median seconds over the verdicts that went through it."""
    phases = sorted({k for v in verdicts for k in v.phase_s})
    return {k: statistics.median(v.phase_s[k] for v in verdicts if k in v.phase_s) for k in phases}
