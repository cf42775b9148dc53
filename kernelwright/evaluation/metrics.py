"""Suite-level figures from verdicts: compile rate, fast_p, geometric-mean speedup, per category.

fast_p = (samples that are correct AND speedup > p) / (all samples, failures included); fast_0 is
the correctness rate. Speedups are ratios of unrounded medians; nothing is rounded here.

Rates are figures over all samples: on a GPU run they are always recorded, 0 when nothing passed.
Figures over the correct samples (geometric-mean speedup, roofline share) and every correctness
or speed figure of a run without a GPU do not apply; they are kept apart with the reason
(`GroupFigures.not_applicable`) instead of being recorded as 0 or NaN.

Two views of correctness (both recorded): KernelBench's, where a correct candidate counts whatever
mix of its own kernels and PyTorch it runs (`fast_0`, `fast_1`, `fast_p.*`, `geomean_speedup`), and
the own-kernel view, where it counts only when its own kernels take at least `own_share` of the
device time (`own.fast_0`, `own.fast_1`, `own.fast_p.*`, `own.geomean_speedup`; default 0.9). The
mean custom-kernel share of the correct samples is `mean_custom_kernel_time_share`.

A third, to compare with published KernelBench figures: the KernelBench view (`kb.fast_0`,
`kb.fast_1`, `kb.geomean_speedup`) counts the verdicts whose outputs met KernelBench's own
tolerance (allclose at atol = rtol = 1e-2; verifier/kb_view.py) with every other check passed,
at their `kb_speedup`; it includes candidates the strict rule rejects as `approximation`,
`precision_downgrade` or `wrong_output` within that tolerance. The gate reads the strict views only.

Flat metric keys (MLflow, results.json): overall figures by name (`fast_p.0.5`), per-category ones
as `category/<category>/<figure>`; `metric_key` and `parse_metric_key` round-trip any category
name without a `/` and any figure name, dots included.

Infill tasks (category `infill:<kind>`, evaluation/infill_suite.py) add figures per region kind:
`infill.<kind>.n` (samples), `infill.<kind>.compile_rate` on any machine and, on a GPU run,
`infill.<kind>.correct_rate` (the strict view's correctness, fast_0 of that kind).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kernelwright.infill_format import category_kind
from kernelwright.verifier.verdict import Verdict

FAST_P_GRID = (0.0, 0.5, 0.8, 1.0, 1.2, 1.5, 2.0, 3.0, 5.0)
CHEAT_REASONS = frozenset({
    "fallback_try_except", "fallback_torch_op", "fallback_runtime", "fallback_decoy", "unwritten_output",
    "input_independent",
    "input_mutation", "async_escape", "result_caching", "harness_tampering", "non_tensor_output",
    "precision_downgrade", "launch_error", "timed_output_mismatch", "timing_inconsistent",
})
OWN = "own."
KB = "kb."
OWN_SHARE = 0.9
_RATES = ("fast_0", "fast_1", *(f"fast_p.{p:g}" for p in FAST_P_GRID))
RATES = (*_RATES, *(OWN + r for r in _RATES), KB + "fast_0", KB + "fast_1")
OVER_CORRECT = ("geomean_speedup", "mean_roofline_share", "mean_custom_kernel_time_share", OWN + "geomean_speedup",
                KB + "geomean_speedup")
CATEGORY_PREFIX = "category/"
NO_CORRECT = "no correct sample"
NO_ROOFLINE = "no correct sample of a problem with flops/bytes_moved"
NO_SHARE = "no correct sample with a measured custom-kernel share"
NO_OWN = "no correct sample whose own kernels carry the device time"
NO_KB = "no sample correct by KernelBench's tolerance with a measured speedup"


Counts = Callable[[Verdict], bool]  # which verdicts a view counts as correct
Speed = Callable[[Verdict], float | None]  # the speedup a view reads


def _any_mix(v: Verdict) -> bool:
    return v.correct


def _strict_speedup(v: Verdict) -> float | None:
    return v.speedup


def kb_correct(v: Verdict) -> bool:
    """The KernelBench view: KernelBench's tolerance held and every other check passed."""
    return v.kb_correct is True


def _kb_speedup(v: Verdict) -> float | None:
    return v.kb_speedup


def fast_p(verdicts: Sequence[Verdict], p: float, counts: Counts = _any_mix, speed: Speed = _strict_speedup) -> float:
    if not verdicts:
        return 0.0
    hits = sum(1 for v in verdicts if counts(v) and (p == 0.0 or ((s := speed(v)) is not None and s > p)))
    return hits / len(verdicts)


def geomean_speedup(verdicts: Sequence[Verdict], counts: Counts = _any_mix,
                    speed: Speed = _strict_speedup) -> float | None:
    speeds = [s for v in verdicts if counts(v) and (s := speed(v)) is not None and s > 0]
    return math.exp(sum(math.log(s) for s in speeds) / len(speeds)) if speeds else None


def mean_roofline_share(verdicts: Sequence[Verdict]) -> float | None:
    roof = [v.roofline_share for v in verdicts if v.correct and v.roofline_share is not None]
    return sum(roof) / len(roof) if roof else None


def mean_custom_share(verdicts: Sequence[Verdict]) -> float | None:
    shares = [v.custom_kernel_time_share for v in verdicts if v.correct and v.custom_kernel_time_share is not None]
    return sum(shares) / len(shares) if shares else None


def own_kernels(own_share: float) -> Counts:
    """The own-kernel view: a correct verdict counts only when its own kernels took at least
    `own_share` of the device time (a share not measured never counts)."""
    def counts(v: Verdict) -> bool:
        return v.correct and v.custom_kernel_time_share is not None and v.custom_kernel_time_share >= own_share
    return counts


class HasVerdict(Protocol):
    @property
    def verdict(self) -> Verdict: ...

    @property
    def compiled(self) -> bool: ...

    @property
    def gpu_verified(self) -> bool: ...

    @property
    def category(self) -> str: ...


@dataclass
class GroupFigures:
    """The figures of one group of samples (the whole suite, or one category)."""

    values: dict[str, float] = field(default_factory=dict)
    not_applicable: dict[str, str] = field(default_factory=dict)  # figure -> why it does not apply

    def get(self, name: str) -> float | None:
        return self.values.get(name)


@dataclass
class SuiteFigures:
    overall: GroupFigures
    categories: dict[str, GroupFigures]
    infill: GroupFigures = field(default_factory=GroupFigures)  # infill.<kind>.* figures, flat keys

    def flat(self) -> dict[str, float]:
        """Every figure that applies, under its flat key."""
        out = dict(self.overall.values)
        for cat, g in self.categories.items():
            out |= {metric_key(k, cat): v for k, v in g.values.items()}
        return out | self.infill.values

    def flat_not_applicable(self) -> dict[str, str]:
        out = dict(self.overall.not_applicable)
        for cat, g in self.categories.items():
            out |= {metric_key(k, cat): v for k, v in g.not_applicable.items()}
        return out | self.infill.not_applicable


def metric_key(figure: str, category: str | None = None) -> str:
    if category is None:
        return figure
    if "/" in category:
        raise ValueError(f"category names cannot hold '/': {category!r}")
    return f"{CATEGORY_PREFIX}{category}/{figure}"


def parse_metric_key(key: str) -> tuple[str | None, str]:
    """(category or None, figure) of a flat key: the inverse of `metric_key`."""
    if not key.startswith(CATEGORY_PREFIX):
        return None, key
    category, _, figure = key[len(CATEGORY_PREFIX):].partition("/")
    return category, figure


def _speed_figures(g: GroupFigures, verdicts: Sequence[Verdict], prefix: str, counts: Counts) -> None:
    g.values |= {f"{prefix}fast_0": fast_p(verdicts, 0.0, counts), f"{prefix}fast_1": fast_p(verdicts, 1.0, counts)}
    g.values |= {f"{prefix}fast_p.{p:g}": fast_p(verdicts, p, counts) for p in FAST_P_GRID}
    _apply(g, f"{prefix}geomean_speedup", geomean_speedup(verdicts, counts), NO_OWN if prefix else NO_CORRECT)


def _apply(g: GroupFigures, name: str, value: float | None, reason: str) -> None:
    if value is None:
        g.not_applicable[name] = reason
    else:
        g.values[name] = value


def group_figures(rows: Sequence[HasVerdict], gpu: bool, no_gpu_reason: str,
                  own_share: float = OWN_SHARE) -> GroupFigures:
    """Figures of one group. `gpu`: the evaluation ran on a CUDA host, so correctness was measured.

    compile_rate counts what was built (or, where no build ran, what NVRTC compiled).
    """
    n = len(rows)
    g = GroupFigures({"samples": float(n)})
    if n == 0:
        return g
    verdicts = [r.verdict for r in rows]
    g.values |= {"compile_rate": sum(r.compiled for r in rows) / n,
                 "gpu_verified_rate": sum(r.gpu_verified for r in rows) / n,
                 "cheat_rate": sum(v.reason in CHEAT_REASONS for v in verdicts) / n}
    if not gpu:
        g.not_applicable = dict.fromkeys((*RATES, *OVER_CORRECT), no_gpu_reason)
        return g
    _speed_figures(g, verdicts, "", _any_mix)
    _speed_figures(g, verdicts, OWN, own_kernels(own_share))
    g.values |= {KB + "fast_0": fast_p(verdicts, 0.0, kb_correct, _kb_speedup),
                 KB + "fast_1": fast_p(verdicts, 1.0, kb_correct, _kb_speedup)}
    _apply(g, KB + "geomean_speedup", geomean_speedup(verdicts, kb_correct, _kb_speedup), NO_KB)
    _apply(g, "mean_roofline_share", mean_roofline_share(verdicts), NO_ROOFLINE)
    _apply(g, "mean_custom_kernel_time_share", mean_custom_share(verdicts), NO_SHARE)
    return g


def infill_figures(rows: Sequence[HasVerdict], gpu: bool, no_gpu_reason: str) -> GroupFigures:
    """`infill.<kind>.n`, `.compile_rate` and (GPU runs) `.correct_rate` of each region kind of the
    infill rows (category `infill:<kind>`); empty without infill rows."""
    kinds: dict[str, list[HasVerdict]] = defaultdict(list)
    for r in rows:
        kind = category_kind(r.category)
        if kind is not None:
            kinds[kind].append(r)
    g = GroupFigures()
    for kind, rs in sorted(kinds.items()):
        key = f"infill.{kind}."
        g.values |= {key + "n": float(len(rs)), key + "compile_rate": sum(r.compiled for r in rs) / len(rs)}
        if gpu:
            g.values[key + "correct_rate"] = sum(r.verdict.correct for r in rs) / len(rs)
        else:
            g.not_applicable[key + "correct_rate"] = no_gpu_reason
    return g


def suite_figures(rows: Sequence[HasVerdict], gpu: bool, no_gpu_reason: str = "no CUDA device",
                  own_share: float = OWN_SHARE) -> SuiteFigures:
    """Overall figures, plus one group per category (sorted by name) and the infill figures per region kind."""
    groups: dict[str, list[HasVerdict]] = defaultdict(list)
    for r in rows:
        groups[r.category].append(r)
    return SuiteFigures(group_figures(rows, gpu, no_gpu_reason, own_share),
                        {cat: group_figures(rs, gpu, no_gpu_reason, own_share) for cat, rs in sorted(groups.items())},
                        infill_figures(rows, gpu, no_gpu_reason))
