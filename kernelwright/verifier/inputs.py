"""Inputs and comparison: what the candidate and the reference run on, and how their outputs are judged.

- `draw_inputs`: a problem's inputs for one shape, seed and distribution (`DISTRIBUTIONS`), on the GPU,
  made there with CUDA's generator (`draw_on_gpu`; the host's generator and a copy where it is off, or
  where the problem's `get_inputs` cannot run under a CUDA default device); `draw_check_inputs`: the
  correctness draws' seeds; `clone`: a fresh copy for each run;
- `compare`: the candidate's output against the reference's and the float64 reference's, by the
  rules of tolerance.py, with the reason when it fails (wrong shape, dtype, precision, an
  approximation, unwritten elements, wrong values) and the rule that judged;
- `poison`: NaN-filled memory where the candidate's output will land, so unwritten elements show.
"""

from __future__ import annotations

import contextlib
import math
from types import ModuleType
from typing import Any

from kernelwright.verifier.error_shape import APPROXIMATION, LOWER, OTHER_FUNCTION, error_kind
from kernelwright.verifier.seeding import seed_all
from kernelwright.verifier.tolerance import FP64, Judgement, judge

DISTRIBUTIONS = ("default", "signed", "heavy_tailed", "small")


_ON_GPU = [True]  # where this process makes its draws (draw_on_gpu); the judge and its runner set it alike


def draw_on_gpu(on: bool) -> None:
    """Make this process's draws on the GPU with CUDA's generator (True, the default) or on the host with
    the CPU's, then copied (False: how judges before version 21 drew). Every process that must draw the
    same inputs (a judge and its runner) sets it alike: the two generators draw different numbers. On the
    host, the correctness draws of ~1M-element inputs cost ~1.3 CPU-s a candidate in each process under
    16 workers (the timed calls' draws are made on the GPU either way: timing.draw_on_device)."""
    _ON_GPU[0] = on


def draw_inputs(problem: ModuleType, shape: dict[str, Any], seed: int, dist: str,
                on_gpu: bool | None = None) -> list[Any]:
    """The draw, made on the GPU where `on_gpu` (None: this process's `draw_on_gpu`) and the problem's
    get_inputs runs there, else on the host and copied."""
    import torch

    if _ON_GPU[0] if on_gpu is None else on_gpu:
        try:
            return _drawn(problem, shape, seed, dist, torch.device("cuda"))
        except Exception:  # noqa: BLE001 - a get_inputs that needs host tensors (numpy, ...): drawn on the host
            pass
    return _drawn(problem, shape, seed, dist, contextlib.nullcontext())


def _drawn(problem: ModuleType, shape: dict[str, Any], seed: int, dist: str,
           device: contextlib.AbstractContextManager[Any]) -> list[Any]:
    """The draw with `device` as torch's default device while it is made."""
    import torch

    seed_all(seed)
    out = []
    with device:
        for x in problem.get_inputs(**shape):
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                if dist == "signed":
                    x = x * (2 * torch.randint_like(x, 0, 2) - 1)
                elif dist == "heavy_tailed":
                    x = x * torch.exp(0.75 * torch.randn_like(x.float())).to(x.dtype)
                elif dist == "small":
                    x = x * 1e-2
            out.append(x.cuda() if isinstance(x, torch.Tensor) else x)
    return out


def draw_check_inputs(problem: ModuleType, shape: dict[str, Any], seed: int, dist: str) -> list[Any]:
    """The correctness draw of `seed` and distribution `dist` (each pair its own RNG seed)."""
    return draw_inputs(problem, shape, 1000 * seed + DISTRIBUTIONS.index(dist), dist)


def clone(inputs: list[Any]) -> list[Any]:
    import torch

    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def compare(out: Any, ref: Any, ref64: Any = None, rules: set[str] | None = None,
            fan_in: int | None = None) -> tuple[str | None, str, float]:
    """(reason or None, detail, max abs error) of `out` against the reference `ref` and the float64
    reference `ref64` (None: there is none, and the fallback rule judges: tolerance.judge) for an
    output of that fan-in (None: not known); the name of the rule that judged is added to `rules`
    where given."""
    form = form_failure(out, ref)
    if form is not None:
        return *form, math.nan
    j = judge(out, ref, ref64, fan_in)
    if rules is not None:
        rules.add(j.rule)
    if j.ok:
        return None, j.detail, j.max_err
    return *_failure(out, ref, ref64, j), j.max_err


def form_failure(out: Any, ref: Any) -> tuple[str, str] | None:
    """(reason, detail) where `out` is not a plain CUDA tensor of the reference's shape and dtype."""
    import torch

    if type(out) is not torch.Tensor:
        return "non_tensor_output", f"output is {type(out).__module__}.{type(out).__name__}"
    if out.device.type != "cuda" or (out.numel() and out.untyped_storage().data_ptr() == 0):
        return "non_tensor_output", "output has no CUDA storage"
    if out.shape != ref.shape:
        return "shape_mismatch", f"shape {tuple(out.shape)} != {tuple(ref.shape)}"
    if out.dtype != ref.dtype:
        return "precision_downgrade", f"dtype {out.dtype} != {ref.dtype}"
    return None


def _failure(out: Any, ref: Any, ref64: Any, j: Judgement) -> tuple[str, str]:
    """(reason, detail) of a failed judgement: NaN where neither reference has any is poison
    showing through (class 2); a float32 error of lower-precision arithmetic is class 8; an error
    that follows the true value like a curve is an approximation of the function (error_shape.py)."""
    import torch

    if j.failed == "nan":
        nan = torch.isnan(out) & ~torch.isnan(ref)
        if bool((nan & ~torch.isnan(ref64)).any() if j.rule == FP64 else nan.any()):
            return "unwritten_output", f"{j.detail}: poisoned elements, not all of the output was written"
    kind = error_kind(j, out, ref, ref64)
    if kind == LOWER:
        return "precision_downgrade", f"{j.detail}: the error of lower-precision arithmetic"
    if kind == APPROXIMATION:
        return "approximation", (f"{j.detail}: an error that follows the true value like a curve, not rounding: "
                                 "an approximation of the function (e.g. tanh-GELU for the exact GELU)")
    if kind == OTHER_FUNCTION:
        return "wrong_output", (f"{j.detail}: an error that follows the true value, too large for an approximation: "
                                "another function than the reference's (an op missing, added or swapped?)")
    return "wrong_output", j.detail


def poison(like: Any) -> None:
    """Fill memory the caching allocator will hand out next: an unwritten output shows as NaN."""
    import torch

    value = float("nan") if like.is_floating_point() else -77
    bait = [torch.full_like(like, value) for _ in range(4)]
    torch.cuda.current_stream().synchronize()
    del bait
