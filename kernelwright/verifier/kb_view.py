"""The KernelBench-compatible view of correctness, beside the strict one.

KernelBench (ScalingIntelligence/KernelBench, `src/kernelbench/eval.py`: `run_and_check_correctness`,
`get_tolerance_for_precision`) calls a candidate correct when, on every trial,
`torch.allclose(reference_output, candidate_output, atol=tol, rtol=tol)` holds, with tol = 1e-2
in float32 (its versions 0 and 0.1, which the published figures use) and 1e-2 for float16 and
bfloat16: |ref - out| <= tol + tol * |out| element for element, the candidate's own magnitude on
the right, and NaN equal to nothing. `kb_close` is that rule (integer and boolean outputs: equal).

The view keeps everything else of the strict judge: the same draws (four input distributions, not
KernelBench's one), shapes, dtypes and every cheat check. A candidate whose outputs the strict rule
rejects (`wrong_output`, `precision_downgrade`, `approximation`) while this rule accepts all of them
is `Deferred`: the judge goes on to time it, and its verdict keeps the strict reason with
`kb_correct` true and `kb_speedup`, so `kb.fast_1` can count it (evaluation/metrics.py). The gate
and any reward read the strict view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelwright.verifier.verdict import Verdict

KB_TOLERANCE = 1e-2
DEFERRABLE = frozenset({"wrong_output", "precision_downgrade", "approximation"})


def kb_close(out: Any, ref: Any) -> bool:
    """KernelBench's correctness of one output: same shape and dtype, and allclose(ref, out) at 1e-2."""
    import torch

    if type(out) is not torch.Tensor or type(ref) is not torch.Tensor or out.shape != ref.shape:
        return False
    if out.dtype != ref.dtype or out.device != ref.device:
        return False
    if not ref.is_floating_point():
        return bool(torch.equal(out, ref))
    return bool(torch.allclose(ref, out, atol=KB_TOLERANCE, rtol=KB_TOLERANCE))


@dataclass
class Deferred:
    """The first strict failure of a candidate that KernelBench's rule accepted so far."""

    reason: str = ""
    detail: str = ""

    def __bool__(self) -> bool:
        return bool(self.reason)

    def hold(self, reason: str, detail: str) -> None:
        if not self.reason:
            self.reason, self.detail = reason, detail

    def verdict(self, strict: Verdict | None, kb_correct: bool, why_not: str = "") -> Verdict:
        """The strict reason, with the figures measured for the KernelBench view (`strict`: the
        verdict the candidate would have had, None where the view ended early) and whether it held."""
        figures: dict[str, Any] = {}
        if strict is not None:
            figures = {k: getattr(strict, k) for k in ("compile_s", "runtime_ms", "ref_runtime_ms",
                                                       "ref_compile_runtime_ms", "roofline_share",
                                                       "custom_kernel_time_share", "warnings",
                                                       "tolerance_rule", "contention")}
        detail = self.detail + (f"; KernelBench's tolerance accepted it, but {why_not}" if why_not else
                                "; KernelBench's tolerance (allclose at 1e-2) accepted every draw")
        kb_speedup = strict.speedup if strict is not None and kb_correct else None
        return Verdict.of(self.reason, detail, kb_correct=kb_correct, kb_speedup=kb_speedup, **figures)


View = tuple[Deferred, bool]  # one shape's check: its held strict failure, and whether KernelBench's rule held


def views_of(checked: Any) -> View:
    """The views' findings of one shape's check (judge_checks.Checked)."""
    return checked.deferred, checked.kb_ok


def strict_or_kb(checked: list[Any]) -> list[View]:
    """The findings of every shape's check; a strict failure where KernelBench's rule failed on
    another shape is the verdict at once (nothing is left to time for either view)."""
    from kernelwright.verifier.isolation import Rejected

    views = [views_of(c) for c in checked]
    held = next((d for d, _ in views if d), None)
    if held is not None and not all(ok for _, ok in views):
        raise Rejected(held.reason, held.detail)
    return views


def settle(strict: Verdict, views: list[View]) -> Verdict:
    """The verdict of a candidate that went through every check: `strict` (correct) with the
    KernelBench view's findings, or the first held strict failure with the figures measured."""
    held = next((d for d, _ in views if d), None)
    kb_ok = all(ok for _, ok in views)
    if held is not None:
        return held.verdict(strict, kb_ok, "" if kb_ok else "not on the re-check's fresh inputs")
    strict.kb_correct, strict.kb_speedup = kb_ok, strict.speedup if kb_ok else None
    return strict
