"""Tolerance by error, not by magnitude: is a candidate's output as close to the truth as the reference's?

The truth is a float64 reference `ref64`: the reference model run in float64 on the same inputs
cast to float64 (`fp64_twin`, `fp64_output`). Both the candidate's output `out` and the
reference's own output `ref` (in the problem's dtype) are measured against it, and the candidate
passes if it is not much further from the truth than the reference is. `judge` applies one of
three rules and says which:

`fp64_relative` (floating outputs with a float64 reference). With rms(x) = sqrt(mean(x^2)),
rmse(a, b) = rms(a - b), eps = torch.finfo(dtype).eps of the output's dtype, over the finite
elements, each element's scale s_i = max(|ref64_i|, rms(ref64)) (`element_scale`) and n the
output's fan-in (how many input elements one output element depends on: `fan_in.py`):

    (a) NaN, +inf and -inf of `out` exactly where ref64 rounded to the output's dtype has them
        (overflow in that dtype is inf); NaN never equals NaN by itself: masks are compared;
    (b) rmse(out, ref64) <= m * rmse(ref, ref64) + floor * eps * rms(ref64)
    (c) |out_i - ref64_i| <= k * max|ref - ref64| + slack * eps * s_i   for every element i

| output dtype | m | floor | k | slack |
| --- | --- | --- | --- | --- |
| float32, float64 | 2 | 8 sqrt(N) | 8 | 32 sqrt(N) |
| float16, bfloat16 | 3 | 1 | 8 | 8 |

with N = max(n, 4096) (4096 where n is not known). The error model: a candidate sums in its own
order (one thread per row in sequence, blocks, a tree, split-K, atomics in any order, Kahan), and
the rounding errors of a sum of n terms grow like sqrt(n) eps times the magnitude of the summed
terms in any of those orders; for same-signed terms that magnitude is the element's own, for
terms that cancel it is the output's typical size, hence s_i. The zoo of honest float32 orders
(tests/verifier/ordering_zoo.py: rows of 1 to 10^6 terms, the judge's four input distributions,
sums, dot products, a serial softmax and a layer norm) reaches 4.6 sqrt(n) normwise and 11
sqrt(n) on one element (tests/fixtures/tolerance/ordering_zoo.json), so (b) and (c) give them a
factor of 1.7 and more; below n = 4096 the floor of 512 eps and slack of 2048 eps cover a few
roundings and a transcendental function per element. Lower precision stays out: float16 and
TF32 input rounding leave 1,750 eps and more (3.4x the floor) up to n = 10^3, 2,200 at 10^4
(2.7x) and 3,700 at 10^5 (1.45x); bfloat16 14,000 and more everywhere. Where n * eps nears 0.1
(rows of 10^6) the statistical model ends: a serial sum of 10^6 near-equal terms (a softmax of
small inputs) stagnates at 3.9e-3 to 5.9e-3 relative, more than bfloat16 input rounding leaves on
the same op, and is rejected; float16 and TF32 input rounding of a layer norm over 10^6 terms is
within what honest float32 loses there, and passes. (b) is torch._dynamo.utils.same's form with
fp64_ref (multiplier 2, 3 for half types), with a floor relative to the output's size. In half
types the accumulation is float32 in reference and candidate alike and the error is the final
rounding, which the reference shares: one ulp of floor is enough where the reference is exact.
(c) keeps a few garbage elements from hiding in a norm (one off by 1e-3 of its scale is 4x over
the slack); k = 8 allows a less lucky rounding than the reference's on the worst element.
Outputs that are all zero get the dtype's smallest normal number. Elements where the reference
itself is not finite but ref64 is (it overflowed in its dtype) are left out of the reference's
error; the candidate must be finite there.

`fp32_allclose` (no float64 reference: the problem fails in float64 or returns another dtype):
NaN and +-inf patterns of `out` equal the reference's, and the finite elements within
torch.allclose's atol = rtol = 1e-4 (1e-2 for float16 and bfloat16; `tolerance`).

`exact` (integer and boolean outputs): equal element for element.

`lower_precision` tells a float32 failure whose error is what TF32, float16 or bfloat16
arithmetic leaves (relative L2 error 1e-4 to 3e-2, spread over at least 1% of the elements) from
other wrong outputs; error_shape.py tells it from an approximation of the function. The constants
live in functions, not module globals, so the harness guard, which holds this module's functions
by identity, holds them too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kernelwright.verifier.seeding import seed_all

FP64 = "fp64_relative"
ALLCLOSE = "fp32_allclose"
EXACT = "exact"


def budget(dtype: Any, fan_in: int | None = None) -> tuple[float, float, float, float]:
    """(m, floor, k, slack) of `fp64_relative` for an output dtype and fan-in (floor in eps * rms(ref64),
    slack in eps * each element's scale); a fan-in of None: not known, 4096."""
    import torch

    if dtype in (torch.float16, torch.bfloat16):
        return 3.0, 1.0, 8.0, 8.0
    root = math.sqrt(max(fan_in or 0, 4096))
    return 2.0, 8.0 * root, 8.0, 32.0 * root


def element_scale(truth: Any, rms: float) -> Any:
    """Each element's scale in the element-wise bound: its own magnitude, never below the output's
    rms (float64, like `truth`)."""
    return truth.abs().clamp(min=rms)


def tolerance(dtype: Any) -> tuple[float, float] | None:
    """(atol, rtol) of the fallback rule; None for integer and boolean dtypes (exact)."""
    import torch

    if dtype in (torch.float16, torch.bfloat16):
        return 1e-2, 1e-2
    return (1e-4, 1e-4) if dtype.is_floating_point else None


@dataclass(frozen=True, slots=True)
class Judgement:
    """A verdict on one output. Errors are against ref64 under `fp64_relative`, against the
    reference otherwise; `*_bound` is what the rule allows (NaN where not measured). Slots, so that
    each field is a class attribute the harness guard holds (a property set on the class could
    otherwise shadow `ok`)."""

    ok: bool
    rule: str
    detail: str
    failed: str = ""  # "", "nan", "inf", "normwise", "elementwise", "values"
    rmse: float = math.nan
    rmse_bound: float = math.nan
    max_err: float = math.nan  # the largest element error
    max_bound: float = math.nan  # the bound of the element closest to (or furthest over) its bound
    rel_err: float = math.nan  # rmse / rms of the truth
    ref_rel_err: float = math.nan  # the reference's own, under fp64_relative
    over_fraction: float = math.nan  # share of finite elements beyond their bound, or the rms error allowed
    elem_ratio: float = math.nan  # the largest error over its element's bound (fp64_relative)

    @property
    def rmse_ratio(self) -> float:
        return self.rmse / self.rmse_bound if self.rmse_bound > 0 else math.nan

    @property
    def max_ratio(self) -> float:
        """The worst element's error over its bound (max_err over max_bound where bounds are uniform)."""
        if not math.isnan(self.elem_ratio):
            return self.elem_ratio
        return self.max_err / self.max_bound if self.max_bound > 0 else math.nan


def judge(out: Any, ref: Any, ref64: Any = None, fan_in: int | None = None) -> Judgement:
    """`out` against the reference `ref` (same shape and dtype: the caller checks) and, where
    given, the float64 reference `ref64` (one of another shape or dtype counts as none); `fan_in`:
    how many input elements one output element depends on (None: not known)."""
    import torch

    if not ref.is_floating_point():
        return _exact(out, ref)
    if ref64 is None or ref64.dtype != torch.float64 or ref64.shape != ref.shape:
        return _allclose(out, ref)
    return _fp64_relative(out, ref, ref64, fan_in)


def lower_precision(j: Judgement, dtype: Any) -> bool:
    """A float32 output that failed with the error of lower-precision arithmetic: relative L2
    error from 1e-4 (a fifth of TF32's and float16's unit roundoff, 4.9e-4) to 3e-2 (a few
    bfloat16 roundings), spread over at least 1% of the elements (a few garbage elements are not
    a precision)."""
    import torch

    return (dtype == torch.float32 and j.failed in ("normwise", "elementwise", "values")
            and 1e-4 <= j.rel_err <= 3e-2 and j.over_fraction >= 0.01)


# ---------------------------------------------------------------- the rules


def _exact(out: Any, ref: Any) -> Judgement:
    bad = int((out != ref).sum())
    return Judgement(bad == 0, EXACT, f"{EXACT}: {bad} elements differ", failed="values" if bad else "",
                     max_err=0.0 if bad == 0 else math.nan)


def _fp64_relative(out: Any, ref: Any, ref64: Any, fan_in: int | None) -> Judgement:
    import torch

    target = ref64.to(out.dtype)  # the correctly rounded truth: what overflows in the output's dtype is inf
    mismatch = _pattern_mismatch(out, target, "the float64 reference")
    if mismatch:
        return Judgement(False, FP64, f"{FP64}: {mismatch[1]}", failed=mismatch[0])
    fin = torch.isfinite(target)
    o, r, t = out[fin].double(), ref[fin].double(), ref64[fin]
    r_ok = torch.isfinite(r)  # the reference's own overflow is not its error
    (m, floor, k, slack), fi = budget(out.dtype, fan_in), torch.finfo(out.dtype)
    rms, rmse, ref_rmse = _rms(t), _rms(o - t), _rms((r - t)[r_ok])
    diff = (o - t).abs()
    ref_max = _max((r - t).abs()[r_ok])
    rmse_bound = m * ref_rmse + floor * fi.eps * rms + fi.tiny
    bounds = k * ref_max + slack * fi.eps * element_scale(t, rms) + fi.tiny
    ratios = diff / bounds
    worst = int(ratios.argmax()) if ratios.numel() else 0
    elem_ratio = float(ratios[worst]) if ratios.numel() else 0.0
    max_bound = float(bounds[worst]) if ratios.numel() else fi.tiny
    failed = "normwise" if rmse > rmse_bound else "elementwise" if elem_ratio > 1 else ""
    rel, ref_rel = _rel(rmse, rms), _rel(ref_rmse, rms)
    at = f"at n = {fan_in}" if fan_in else "n not known"
    detail = (f"{FP64}: relative L2 error {rel:.3g} (the reference's own {ref_rel:.3g}), rmse {rmse:.3g} of "
              f"{rmse_bound:.3g} allowed ({at}), max err {_max(diff):.3g}; the worst element "
              f"{float(diff[worst]) if diff.numel() else 0.0:.3g} of {max_bound:.3g} allowed")
    return Judgement(not failed, FP64, detail, failed, rmse, rmse_bound, _max(diff), max_bound, rel, ref_rel,
                     _share((diff > rmse_bound) | (ratios > 1)), elem_ratio)


def _allclose(out: Any, ref: Any) -> Judgement:
    import torch

    mismatch = _pattern_mismatch(out, ref, "the reference")
    if mismatch:
        return Judgement(False, ALLCLOSE, f"{ALLCLOSE}: {mismatch[1]}", failed=mismatch[0])
    atol, rtol = tolerance(ref.dtype) or (0.0, 0.0)
    fin = torch.isfinite(ref)
    o, r = out[fin].double(), ref[fin].double()
    close = torch.isclose(o, r, atol=atol, rtol=rtol)
    ok = bool(close.all())
    rms, rmse, max_err = _rms(r), _rms(o - r), _max((o - r).abs())
    detail = f"{ALLCLOSE}: max err {max_err:.3g} (atol = rtol = {atol:g}), relative L2 error {_rel(rmse, rms):.3g}"
    return Judgement(ok, ALLCLOSE, detail, "" if ok else "values", rmse=rmse, max_err=max_err,
                     rel_err=_rel(rmse, rms), over_fraction=_share(~close))


def _pattern_mismatch(out: Any, target: Any, name: str) -> tuple[str, str] | None:
    """("nan" or "inf", what differs) where the NaN or the +-inf elements of `out` are not those of `target`."""
    import torch

    nan_o, nan_t = torch.isnan(out), torch.isnan(target)
    if extra := int((nan_o & ~nan_t).sum()):
        return "nan", f"{extra} NaN elements where {name} has none"
    if missing := int((nan_t & ~nan_o).sum()):
        return "nan", f"{missing} elements not NaN where {name} is NaN"
    inf = int(((torch.isposinf(out) != torch.isposinf(target)) | (torch.isneginf(out) != torch.isneginf(target))).sum())
    return ("inf", f"{inf} elements differ from {name} in +-inf (position or sign)") if inf else None


def _rms(x: Any) -> float:
    return float(x.square().mean().sqrt()) if x.numel() else 0.0


def _max(x: Any) -> float:
    return float(x.max()) if x.numel() else 0.0


def _rel(err: float, rms: float) -> float:
    return err / rms if rms else (0.0 if err == 0 else math.inf)


def _share(mask: Any) -> float:
    return float(mask.double().mean()) if mask.numel() else 0.0


# ---------------------------------------------------------------- timed outputs, against float32


CALIBRATED = "fp32_calibrated"


@dataclass(frozen=True, slots=True)
class TimedBound:
    """How far the candidate's outputs were from the float32 reference's on the correctness draws
    (which the full rule judged): the largest relative L2 error and the largest element error, both
    relative to the reference's rms. The timed calls' outputs are held to a few times these."""

    rel_l2: float = 0.0
    max_rel: float = 0.0

    def widened(self, out: Any, ref: Any) -> TimedBound:
        """This bound grown to cover `out` (a correctness draw's output that passed)."""
        rel_l2, max_rel = _against_fp32(out, ref)
        return TimedBound(max(self.rel_l2, rel_l2), max(self.max_rel, max_rel))


def _against_fp32(out: Any, ref: Any) -> tuple[float, float]:
    import torch

    if not ref.is_floating_point():
        return 0.0, 0.0
    fin = torch.isfinite(ref) & torch.isfinite(out)
    o, r = out[fin].double(), ref[fin].double()
    rms = _rms(r)
    return _rel(_rms(o - r), rms), _rel(_max((o - r).abs()), rms)


def judge_timed(out: Any, ref: Any, bound: TimedBound) -> Judgement:
    """`fp32_calibrated`: a timed call's output against the float32 reference on the same inputs:
    the NaN/inf pattern of the reference, a relative L2 error within 4x the correctness draws'
    largest plus 16 eps, and no element further than 4x their largest element error plus 64 eps
    (both relative to the reference's rms). Integer outputs: exact."""
    import torch

    if not ref.is_floating_point():
        return _exact(out, ref)
    mismatch = _pattern_mismatch(out, ref, "the reference")
    if mismatch:
        return Judgement(False, CALIBRATED, f"{CALIBRATED}: {mismatch[1]}", failed=mismatch[0])
    eps = torch.finfo(ref.dtype).eps
    rel_l2, max_rel = _against_fp32(out, ref)
    l2_bound, max_bound = 4 * bound.rel_l2 + 16 * eps, 4 * bound.max_rel + 64 * eps
    failed = "normwise" if rel_l2 > l2_bound else "elementwise" if max_rel > max_bound else ""
    detail = (f"{CALIBRATED}: relative L2 error {rel_l2:.3g} of {l2_bound:.3g} allowed, largest element error "
              f"{max_rel:.3g} of {max_bound:.3g} (relative to the reference's rms; bounds from the correctness draws)")
    return Judgement(not failed, CALIBRATED, detail, failed, rel_err=rel_l2)


# ---------------------------------------------------------------- the float64 reference


def to_fp64(inputs: list[Any]) -> list[Any]:
    """Floating tensors as float64 copies, other tensors as copies, anything else as it is."""
    import torch

    return [(x.double() if x.is_floating_point() else x).clone() if isinstance(x, torch.Tensor) else x
            for x in inputs]


def fp64_twin(problem: ModuleType, init: list[Any], ref: Any, seed: int, warm: list[Any],
              device: str = "cuda") -> Any | None:
    """The reference's float64 twin: a second `problem.Model(*init)` given the reference's parameters
    and buffers (load_state_dict) and cast to float64, run once on `warm` in float64; None where the
    problem cannot run in float64 (anything raises, or that output is not a float64 tensor).

    It is built from the problem's class and nn.Module's own methods, which the harness guard holds,
    rather than copy.deepcopy, whose module (and its dispatch table) nothing holds.
    """
    import torch

    try:
        seed_all(seed)
        twin = problem.Model(*init).to(device)
        twin.load_state_dict(ref.state_dict())
        twin = twin.double().eval()
        with torch.no_grad():
            out = twin(*to_fp64(warm))
    except Exception:  # noqa: BLE001 - any failure in float64 means no float64 reference: the fallback rule
        return None
    return twin if type(out) is torch.Tensor and out.dtype == torch.float64 else None


def fp64_output(twin: Any | None, inputs: list[Any]) -> Any | None:
    """The twin's output on `inputs` cast to float64; None without a twin, or where it fails or
    returns anything but a float64 tensor."""
    import torch

    if twin is None:
        return None
    try:
        with torch.no_grad():
            out = twin(*to_fp64(inputs))
    except Exception:  # noqa: BLE001 - as in fp64_twin: this draw is judged by the fallback rule
        return None
    return out if type(out) is torch.Tensor and out.dtype == torch.float64 else None
