"""What a failed comparison's error looks like: lower-precision arithmetic, or an approximation.

Both leave a float32 output off by 1e-4 to 1e-2 relative over most of its elements (the band of
`tolerance.lower_precision`), and neither is an error any float32 summation order makes. They
differ in the error's shape against the true value:

- rounding to a lower precision (bfloat16, float16 or TF32 inputs, products or accumulators; an
  output stored in a half type) is unbiased: two elements of the same true value are off by
  unrelated amounts of either sign, so the error's mean over elements of similar true values is
  near zero. Truncating instead of rounding adds a part proportional to the value, which is
  removed first;
- an approximation of the function (GELU's tanh form for the exact GELU, a polynomial erf, an
  approximate exp) is a deterministic function of its argument: elements of similar true values
  are off by similar amounts, and those means carry most of the error.

`systematic_share` measures it: the elements sorted by their true value into bins of equal count
(at least 16 elements each: a per-row reduction's few hundred outputs are enough),
the error less its least-squares part proportional to the value, and the share of that error's
energy which the bins' means carry. Measured (tests/verifier/test_error_shape.py): tanh-GELU after
a linear layer or a convolution, pooled or not, 0.66 to 0.88 on the judge's input distributions;
bfloat16, float16 and TF32 (rounded or truncated) inputs, a half-precision erf, a bfloat16 output,
0.16 at most; honest float32 about 0.06. An output most of whose elements are exact half-precision
values was stored in one: lower precision, whatever the shape (`half_values_share`).

An error that is mostly a wrong scale (out = 1.01 x the truth) is neither: rounding, even
truncation to bfloat16, scales by less than 1/128. Nor is a systematic error above
`APPROXIMATION_MAX_REL` of the output's norm: approximations written into kernels stay far below
it (tanh-GELU 1e-4 to 3e-4, a degree-3 polynomial exp in a softmax 7e-5), while an op the problem
does not have can be near the identity where the output lies (mish around a row max: 2e-3 to 5e-3)
and coarse approximations are a percent off (x * sigmoid(1.702 x) for GELU: 1e-2). An error above it
that follows the true value is another function (an op the problem does not have, a wrong
constant): a wrong output, and never a precision downgrade, which is a cheat class.

`error_kind`: "lower_precision", "approximation", "other_function" (a wrong output that follows the
true value: another function) or "" (a plain wrong output).
"""

from __future__ import annotations

import math
from typing import Any

from kernelwright.verifier.tolerance import FP64, Judgement, lower_precision

LOWER = "lower_precision"
APPROXIMATION = "approximation"
OTHER_FUNCTION = "other_function"  # a wrong output whose error follows the true value: another function
APPROXIMATION_MAX_REL = 2e-3  # relative L2 error: ~10x what GELU's tanh form leaves
MIN_BIN = 16  # elements per bin of systematic_share: pure noise carries ~1/16 of the energy, far below 0.4
MIN_BINS = 8


def scale_error(out: Any, truth: Any) -> tuple[float, float]:
    """(a, share): the error's least-squares part proportional to the true value, out ~ (1 + a) truth,
    and the share of the error's energy it carries."""
    import torch

    fin = torch.isfinite(out) & torch.isfinite(truth)
    o, t = out[fin].double(), truth[fin].double()
    err, energy = o - t, float(t.square().sum())
    total = float(err.square().sum())
    if not energy or not total:
        return 0.0, 0.0
    a = float((err * t).sum()) / energy
    return a, a * a * energy / total


def systematic_share(out: Any, truth: Any) -> float:
    """The share of the error's energy that is a function of the true value (0: noise, 1: a curve);
    NaN where fewer than 128 finite elements leave too few bins (8 of 16) to tell."""
    import torch

    fin = torch.isfinite(out) & torch.isfinite(truth)
    o, t = out[fin].double().flatten(), truth[fin].double().flatten()
    bins = min(256, t.numel() // MIN_BIN)
    if bins < MIN_BINS:
        return math.nan
    err = o - t
    energy = float(t.square().sum())
    resid = err - (float((err * t).sum()) / energy) * t if energy else err
    total = float(resid.square().sum())
    if total == 0:
        return 0.0
    sorted_resid = resid[torch.argsort(t)]
    edges = torch.linspace(0, t.numel(), bins + 1, dtype=torch.float64).round().long().tolist()
    carried = sum(float(sorted_resid[a:b].sum()) ** 2 / (b - a) for a, b in zip(edges[:-1], edges[1:], strict=True)
                  if b > a)
    return carried / total


def half_values_share(out: Any) -> float:
    """The share of finite nonzero float32 elements that are exact bfloat16 or float16 values (of an
    honest float32 computation, about 1 in 8,000)."""
    import torch

    fin = out[torch.isfinite(out) & (out != 0)].float()
    if not fin.numel():
        return 0.0
    half = (fin.half().float() == fin) | (fin.bfloat16().float() == fin)
    return float(half.double().mean())


def error_kind(j: Judgement, out: Any, ref: Any, ref64: Any) -> str:
    """LOWER, APPROXIMATION, OTHER_FUNCTION or "" for a failed judgement of a floating output: within the
    lower-precision band (relative L2 error at most 3e-2, over at least 1% of the elements), an
    output of half-precision values is LOWER; an error that is mostly a function of the true value
    (`systematic_share` of 0.4 or more; the true value is ref64 where the rule had it, else the
    reference) is APPROXIMATION up to APPROXIMATION_MAX_REL, in any floating dtype and below the
    band too, and OTHER_FUNCTION above it; with too few elements to tell, ""; the rest of a
    float32 band (relative L2 error 1e-4 and more) is LOWER, unless most of it is a scale off by
    more than truncation to bfloat16 makes (1/128): a wrong factor, not a precision ("")."""
    import torch

    if not out.is_floating_point() or j.failed not in ("normwise", "elementwise", "values"):
        return ""
    if not (j.rel_err <= 3e-2 and j.over_fraction >= 0.01):
        return ""
    if out.dtype == torch.float32 and half_values_share(out) >= 0.5:
        return LOWER
    truth = ref64 if j.rule == FP64 and ref64 is not None else ref
    share = systematic_share(out, truth)
    if share >= 0.4:
        return APPROXIMATION if j.rel_err <= APPROXIMATION_MAX_REL else OTHER_FUNCTION
    if math.isnan(share) or not lower_precision(j, out.dtype):  # too few elements to tell: not a cheat
        return ""
    a, carried = scale_error(out, truth)
    return "" if carried >= 0.5 and abs(a) > 2.0**-7 else LOWER
