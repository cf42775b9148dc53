"""A verdict's figures from its shapes': geometric means, the roofline share, timing warnings.

- `summarise`: the `ok` verdict of shapes that all passed (speedup = ratio of the geomeans; the
  tolerance rules of every shape; the least kernel share);
- `roofline`: the share of the speed of light a runtime reaches, from the problem's `flops` and
  `bytes_moved` and the GPU's peaks.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

from kernelwright.verifier.spec import Spec
from kernelwright.verifier.verdict import ShapeResult, Verdict


def _geomean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals and len(vals) == len(values) else None


def _timing_warnings(shapes: list[ShapeResult], runtime: float | None, speedup: float | None) -> list[str]:
    """A speedup over 10x beside the judge's wall-clock estimate; shapes whose every timing attempt
    other work on the GPU disturbed."""
    wall = _geomean([s.wall_runtime_ms for s in shapes])
    out = ([f"speedup {speedup:.1f}x: the timer's {runtime:.4f} ms per call beside the judge's wall-clock "
            f"estimate of {wall:.4f} ms"] if speedup and speedup > 10 and wall is not None else [])
    if disturbed := sum(s.timing_disturbed for s in shapes):
        out.append(f"other work on the GPU disturbed every timing attempt of {disturbed} shape(s): "
                   "those figures may read slow")
    return out


def summarise(shapes: list[ShapeResult], compile_s: float) -> Verdict:
    """Top-level figures are geometric means over shapes (speedup = ratio of the geomeans); the
    tolerance rules are those of every shape."""
    runtime = _geomean([s.runtime_ms for s in shapes])
    ref = _geomean([s.ref_runtime_ms for s in shapes])
    shares = [s.custom_kernel_time_share for s in shapes if s.custom_kernel_time_share is not None]
    roof = [s.roofline_share for s in shapes if s.roofline_share is not None]
    speedup = (ref / runtime) if runtime and ref else None
    warnings = _timing_warnings(shapes, runtime, speedup)
    return Verdict.of(
        "ok", "correct on every shape, seed and input distribution", compile_s=compile_s, runtime_ms=runtime,
        warnings=warnings,
        ref_runtime_ms=ref, ref_compile_runtime_ms=_geomean([s.ref_compile_runtime_ms for s in shapes]),
        speedup=speedup, per_shape=shapes,
        roofline_share=sum(roof) / len(roof) if roof else None,
        custom_kernel_time_share=min(shares) if shares else None,
        tolerance_rule=",".join(sorted({r for s in shapes for r in s.tolerance_rule.split(",") if r})),
    )


def roofline(problem: ModuleType, shape: dict[str, Any], dtype: str, runtime_ms: float, spec: Spec) -> float | None:
    if not (hasattr(problem, "flops") and hasattr(problem, "bytes_moved")) or runtime_ms <= 0:
        return None
    peaks = spec.peak_flops or {"float32": 67e12, "bfloat16": 790e12, "float16": 790e12, "int8": 1580e12}
    t_flops = float(problem.flops(**shape)) / peaks.get(dtype, peaks["float32"])
    t_bytes = float(problem.bytes_moved(**shape)) / spec.peak_bytes_per_s
    t_sol_ms = max(1e3 * max(t_flops, t_bytes), spec.launch_floor_ms)
    return t_sol_ms / runtime_ms
