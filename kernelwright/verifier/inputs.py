"""Inputs and comparison: what the candidate and the reference run on, and how their outputs are judged.

- `draw_inputs`: a problem's inputs for one shape, seed and distribution (`DISTRIBUTIONS`), on the GPU;
  `draw_check_inputs`: the correctness draws' seeds; `clone`: a fresh copy for each run;
- `compare`: the candidate's output against the reference's, within `tolerance` of its dtype, with
  the reason when it is not (wrong shape, dtype, precision, unwritten elements, wrong values);
- `poison`: NaN-filled memory where the candidate's output will land, so unwritten elements show.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

DISTRIBUTIONS = ("default", "signed", "heavy_tailed", "small")


def draw_inputs(problem: ModuleType, shape: dict[str, Any], seed: int, dist: str) -> list[Any]:
    import torch

    torch.manual_seed(seed)
    inputs = problem.get_inputs(**shape)
    out = []
    for x in inputs:
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


def tolerance(dtype: Any) -> tuple[float, float] | None:
    import torch

    if dtype in (torch.float16, torch.bfloat16):
        return 1e-2, 1e-2
    return (1e-4, 1e-4) if dtype.is_floating_point else None


def compare(out: Any, ref: Any) -> tuple[str | None, str, float]:
    """(reason or None, detail, max abs error)."""
    import torch

    if type(out) is not torch.Tensor:
        return "non_tensor_output", f"output is {type(out).__module__}.{type(out).__name__}", math.nan
    if out.device.type != "cuda" or (out.numel() and out.untyped_storage().data_ptr() == 0):
        return "non_tensor_output", "output has no CUDA storage", math.nan
    if out.shape != ref.shape:
        return "shape_mismatch", f"shape {tuple(out.shape)} != {tuple(ref.shape)}", math.nan
    if out.dtype != ref.dtype:
        return "precision_downgrade", f"dtype {out.dtype} != {ref.dtype}", math.nan
    tol = tolerance(ref.dtype)
    if tol is None:
        bad = int((out != ref).sum())
        return (None if bad == 0 else "wrong_output"), f"{bad} elements differ", float(bad)
    diff = (out.double() - ref.double()).abs()
    finite = torch.isfinite(diff)
    err = float(diff[finite].max()) if bool(finite.any()) else 0.0
    if torch.allclose(out, ref, atol=tol[0], rtol=tol[1], equal_nan=True):
        return None, f"max abs err {err:.3g}", err
    if bool((torch.isnan(out) & ~torch.isnan(ref)).any()):
        return "unwritten_output", "poisoned (NaN) elements in the output: not all of it was written", err
    rel = float(torch.linalg.vector_norm((out.double() - ref.double()).nan_to_num())
                / torch.linalg.vector_norm(ref.double().nan_to_num()).clamp(min=1e-30))
    if ref.dtype == torch.float32 and 2e-4 <= rel <= 3e-2:
        return "precision_downgrade", f"relative error {rel:.2e}: lower-precision arithmetic", err
    return "wrong_output", f"max abs err {err:.3g}, relative L2 error {rel:.3g}", err


def poison(like: Any) -> None:
    """Fill memory the caching allocator will hand out next: an unwritten output shows as NaN."""
    import torch

    value = float("nan") if like.is_floating_point() else -77
    bait = [torch.full_like(like, value) for _ in range(4)]
    torch.cuda.current_stream().synchronize()
    del bait
