"""Suite-level metrics from verdicts: compile rate, fast_p, geometric-mean speedup, per category.

fast_p = (samples that are correct AND speedup > p) / (all samples, failures included); fast_0 is
the correctness rate. Speedups are ratios of unrounded medians; nothing is rounded here.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Protocol

from kernelwright.verifier.verdict import Verdict

FAST_P_GRID = (0.0, 0.5, 0.8, 1.0, 1.2, 1.5, 2.0, 3.0, 5.0)
CHEAT_REASONS = frozenset({
    "fallback_try_except", "fallback_torch_op", "fallback_runtime", "unwritten_output", "input_independent",
    "input_mutation", "async_escape", "result_caching", "harness_tampering", "non_tensor_output",
    "precision_downgrade", "launch_error",
})


def fast_p(verdicts: Sequence[Verdict], p: float) -> float:
    if not verdicts:
        return 0.0
    hits = sum(1 for v in verdicts if v.correct and (p == 0.0 or (v.speedup is not None and v.speedup > p)))
    return hits / len(verdicts)


def geomean_speedup(verdicts: Sequence[Verdict]) -> float | None:
    speeds = [v.speedup for v in verdicts if v.correct and v.speedup is not None and v.speedup > 0]
    return math.exp(sum(math.log(s) for s in speeds) / len(speeds)) if speeds else None


def summary(verdicts: Sequence[Verdict]) -> dict[str, float]:
    n = len(verdicts)
    if n == 0:
        return {"samples": 0.0}
    compiled = sum(1 for v in verdicts if v.status not in ("compile_error",) and v.reason not in ("syntax_error",))
    roof = [v.roofline_share for v in verdicts if v.correct and v.roofline_share is not None]
    out = {
        "samples": float(n),
        "compile_rate": compiled / n,
        "fast_0": fast_p(verdicts, 0.0),
        "fast_1": fast_p(verdicts, 1.0),
        "cheat_rate": sum(1 for v in verdicts if v.reason in CHEAT_REASONS) / n,
        "mean_roofline_share": sum(roof) / len(roof) if roof else math.nan,
    }
    gm = geomean_speedup(verdicts)
    out["geomean_speedup"] = gm if gm is not None else math.nan
    for p in FAST_P_GRID:
        out[f"fast_p.{p:g}"] = fast_p(verdicts, p)
    return out


class HasVerdict(Protocol):
    @property
    def verdict(self) -> Verdict: ...

    @property
    def compiled(self) -> bool: ...

    @property
    def gpu_verified(self) -> bool: ...

    @property
    def category(self) -> str: ...


def rows_summary(rows: Sequence[HasVerdict]) -> dict[str, float]:
    """Figures of one group of evaluated samples.

    compile_rate counts what was built (or, where no build ran, what NVRTC compiled). Correctness
    and speed figures exist only where samples ran on a GPU: with none, they are left out rather
    than reported as zero.
    """
    if not rows:
        return {"samples": 0.0}
    n = len(rows)
    verified = sum(r.gpu_verified for r in rows)
    out = {"samples": float(n), "compile_rate": sum(r.compiled for r in rows) / n,
           "gpu_verified_rate": verified / n,
           "cheat_rate": sum(r.verdict.reason in CHEAT_REASONS for r in rows) / n}
    if verified:
        full = summary([r.verdict for r in rows])
        out |= {k: v for k, v in full.items() if k not in out}
    return out


def suite_metrics(rows: Sequence[HasVerdict]) -> dict[str, float]:
    """Overall figures, plus `category.<name>.<figure>` for each category."""
    groups: dict[str, list[HasVerdict]] = defaultdict(list)
    for r in rows:
        groups[r.category].append(r)
    out = rows_summary(rows)
    for cat, rs in sorted(groups.items()):
        out |= {f"category.{cat}.{k}": v for k, v in rows_summary(rs).items()}
    return out
