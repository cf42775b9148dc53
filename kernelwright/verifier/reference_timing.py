"""The reference's figures, timed in the judge's process with its own timer (never the runner's).

- `reference_figures`: the reference and its torch.compile on fresh inputs of the judge's seed,
  under the timing lock (judge_timing.time_shape), cached only when nothing disturbed them;
- `compiled_reference`: torch.compile of the reference, warmed up (None where it cannot compile).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from kernelwright.verifier.spec import Spec
from kernelwright.verifier.timer import Timer
from kernelwright.verifier.timing import RefCache, TimingSettings, fresh_sets, measure, write_ref_cache


def time_reference(models: tuple[Any, Any], draw: Any, timer: Timer, settings: TimingSettings, flush: Any,
                   ref: RefCache) -> tuple[float, float | None]:
    """The reference (and its torch.compile) timed in the judge's process on fresh inputs
    (`draw(attempt)`); cached only when other work disturbed neither."""
    ref_model, compiled_model = models
    measured = measure(ref_model, draw, timer, settings, flush)
    compiled = measure(compiled_model, draw, timer, settings, flush) if compiled_model is not None else None
    ref_ms, compiled_ms = measured.timed.median_ms, compiled.timed.median_ms if compiled is not None else None
    if not measured.disturbed and not (compiled is not None and compiled.disturbed):
        write_ref_cache(ref.path, ref_ms, compiled_ms)
    return ref_ms, compiled_ms


def reference_figures(models: tuple[Any, Any], problem: ModuleType, shape: dict[str, Any], spec: Spec,
                      ref: RefCache) -> tuple[float, float | None]:
    """The reference's and its torch.compile's median ms on the shape, on inputs of the judge's seed."""
    import torch

    settings = TimingSettings.of(spec)
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")

    def draw(attempt: int) -> list[list[Any]]:
        return fresh_sets(problem, shape, settings, spec.timing_seed + 7_000_000 + 100_000 * attempt)

    return time_reference(models, draw, Timer(), settings, flush, ref)


def compiled_reference(ref_model: Any, sets: list[list[Any]]) -> Any:
    """torch.compile of the reference, compiled and warmed up; None if it cannot compile."""
    import torch

    try:
        compiled = torch.compile(ref_model)
        for args in sets:
            compiled(*args)
        torch.cuda.synchronize()
        return compiled
    except Exception:  # noqa: BLE001 - the baseline is optional; its absence is reported as null
        return None
