"""Timing: the candidate, the reference and the torch.compile baseline, timed the same way.

- `median_ms`: the median of a forward's trials on the `Timer` (timer.py), each after an L2 flush;
- the reference-timing cache (`ref_cache_path`, `RefCache`, `read_ref_cache`): reference figures
  kept per problem, shape, GPU and settings, read before the candidate is imported;
- `time_shape`: one shape's figures (the timing lock held while timing), the profiler's share of
  GPU time in the candidate's kernels and the roofline share (`_roofline`) with them.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelwright import atomic
from kernelwright.verifier.guard import HarnessGuard, held_models
from kernelwright.verifier.inputs import draw_inputs
from kernelwright.verifier.isolation import exclusive
from kernelwright.verifier.profiling import custom_share
from kernelwright.verifier.spec import Progress, Spec
from kernelwright.verifier.timer import Timer
from kernelwright.verifier.verdict import ShapeResult

# ---------------------------------------------------------------- timing


def median_ms(fn: Any, inputs_sets: list[list[Any]], timer: Timer, spec: Spec, flush: Any) -> float:
    import torch

    stream = torch.cuda.current_stream().cuda_stream
    for i in range(3):
        fn(*inputs_sets[i % len(inputs_sets)])
    torch.cuda.synchronize()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < spec.max_trials:
        flush.zero_()  # L2 flush, outside the timed region
        args = inputs_sets[len(times) % len(inputs_sets)]
        times.append(timer.time_ms(lambda a=args: fn(*a), stream))
        if len(times) >= spec.min_trials and time.perf_counter() - start > spec.timing_budget_s:
            break
    times.sort()
    mid = len(times) // 2
    return times[mid] if len(times) % 2 else 0.5 * (times[mid - 1] + times[mid])


# ---------------------------------------------------------------- the reference-timing cache


def ref_cache_path(problem: ModuleType, shape: dict[str, Any], spec: Spec) -> Path | None:
    """Reference timings are kept per problem file, shape, GPU, torch version and timing settings."""
    import torch

    if not (spec.ref_timing_cache and spec.build_cache):
        return None
    key = json.dumps([Path(problem.__file__ or "").read_text(encoding="utf-8"), shape, torch.cuda.get_device_name(),
                      torch.__version__, spec.seeds[0], spec.compile_baseline, spec.min_trials, spec.max_trials,
                      spec.timing_budget_s], sort_keys=True, default=str)
    return Path(spec.build_cache) / "ref-timings" / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


@dataclass(frozen=True)
class RefCache:
    """Where a shape's reference timings are cached and what was there (ms: reference, torch.compile),
    both settled before the candidate is imported, so it can neither forge nor redirect its baseline."""

    path: Path | None
    figures: tuple[float, float | None] | None


def read_ref_cache(path: Path | None) -> RefCache:
    if path is None or not path.is_file():
        return RefCache(path, None)
    try:
        data = json.loads(path.read_text())
        return RefCache(path, (float(data["ref_runtime_ms"]), data["ref_compile_runtime_ms"]))
    except (OSError, ValueError, KeyError, TypeError):
        return RefCache(path, None)


def _write_ref_cache(path: Path | None, ref_ms: float, compiled_ms: float | None) -> None:
    if path is not None:
        atomic.write_json(path, {"ref_runtime_ms": ref_ms, "ref_compile_runtime_ms": compiled_ms})


# ---------------------------------------------------------------- one shape


def time_shape(problem: ModuleType, candidate: ModuleType, shape: dict[str, Any], spec: Spec,
               harness: tuple[Timer, HarnessGuard], names: set[str], dtype: str, ref: RefCache,
               progress: Progress | None = None) -> ShapeResult:
    """Candidate, reference and torch.compile baseline timed the same way, one process at a time.

    Cached reference figures (`ref`, read before the candidate was imported) replace timing the
    reference again; torch.compile and the profiler's kernel share run outside the lock (kernel
    durations are a ratio there, not a timing). The guard holds the reference model meanwhile and
    is checked at the end.
    """
    import torch

    timer, guard = harness
    sets = [draw_inputs(problem, shape, 7000 + i, "default") for i in range(3)]
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")
    with torch.no_grad(), held_models(problem, candidate, spec.seeds[0], guard, sets[0]) as (ref_model, new_model):
        phase = progress.write if progress is not None else (lambda **_: None)
        phase(phase="compile_baseline")
        compiled_model = _compiled(ref_model, sets) if ref.figures is None and spec.compile_baseline else None
        phase(phase="timing_wait")
        with exclusive(spec.timing_lock):
            phase(phase="timing")
            runtime = median_ms(new_model, sets, timer, spec, flush)
            if ref.figures is None:
                ref_ms = median_ms(ref_model, sets, timer, spec, flush)
                compiled_ms = (median_ms(compiled_model, sets, timer, spec, flush)
                               if compiled_model is not None else None)  # OptimizedModule: bool() calls len()
                _write_ref_cache(ref.path, ref_ms, compiled_ms)
            else:
                ref_ms, compiled_ms = ref.figures
        # Outside the lock, like the correctness runs: its few forwards barely load the GPU.
        phase(phase="profile")
        share = custom_share(new_model, sets[0], names)
        guard.check()  # the timed forwards ran with the timer and the reference in reach
    return ShapeResult(shape=shape, correct=True, runtime_ms=runtime, ref_runtime_ms=ref_ms,
                       ref_compile_runtime_ms=compiled_ms, speedup=ref_ms / runtime if runtime > 0 else None,
                       roofline_share=_roofline(problem, shape, dtype, runtime, spec), custom_kernel_time_share=share)


def _compiled(ref_model: Any, sets: list[list[Any]]) -> Any:
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


def _roofline(problem: ModuleType, shape: dict[str, Any], dtype: str, runtime_ms: float, spec: Spec) -> float | None:
    if not (hasattr(problem, "flops") and hasattr(problem, "bytes_moved")) or runtime_ms <= 0:
        return None
    peaks = spec.peak_flops or {"float32": 67e12, "bfloat16": 790e12, "float16": 790e12, "int8": 1580e12}
    t_flops = float(problem.flops(**shape)) / peaks.get(dtype, peaks["float32"])
    t_bytes = float(problem.bytes_moved(**shape)) / spec.peak_bytes_per_s
    t_sol_ms = max(1e3 * max(t_flops, t_bytes), spec.launch_floor_ms)
    return t_sol_ms / runtime_ms
