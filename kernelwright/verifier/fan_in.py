"""An output's fan-in: how many input elements one output element depends on, from the float64 twin.

The tolerance's error model (tolerance.py) needs the length n of the sums behind each output
element: the rounding error of any honest summation order grows like sqrt(n). A judge does not
know the op, so it measures n on the reference's float64 twin: it perturbs a random share p of the
floating input elements (each by 2^-6 of its magnitude plus the input's rms) and counts the output
elements that did not move. An element that depends on n inputs stays put with probability
(1 - p)^n, so n = ln(share unchanged) / ln(1 - p). Shares p of 2^-1, 2^-5, 2^-10, 2^-15 and 2^-20
are tried in turn until 2% or more of the elements stayed put, counting only the elements that move
when every input does (a first forward): an element-wise op reads n = 1 at the first share, a row
of 10^6 terms at the last. The share that answers is probed 4 times (elements of one row move
together, so a few rows are few observations), and so is every share where fewer than 256
elements can move; otherwise one float64 forward per share. An element counts as
moved when it changed by more than 2^-40 of its scale (its magnitude or the output's rms), far above
float64's rounding and far below what one perturbed term of a sum of 10^9 changes.

Only inputs count (a Linear layer's output depends on its K inputs; its weights are not perturbed),
and only those that influence the output: an input behind a ReLU at zero, or not the maximum of its
pooling window, moves nothing and has no rounding to pass on.

A problem's fan-in is the same for every candidate: `cached_fan_in` keeps it under
`<build_cache>/fan-in/`, keyed by the problem file's text, the shape and the first seed, beside the
reference timings (the judge alone writes there; a runner cannot).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelwright import jsontext
from kernelwright.atomic import write_json

SHARES = (2.0**-1, 2.0**-5, 2.0**-10, 2.0**-15, 2.0**-20)
STEP = 2.0**-6
REPEATS = 4
MOVED = 2.0**-40


def estimate_fan_in(run: Callable[[list[Any]], Any], inputs: list[Any], out64: Any, seed: int) -> int | None:
    """The typical fan-in of `out64` (the float64 output of `run` on `inputs`); None where it cannot
    be measured (no floating input, no float64 output, a probe that fails)."""
    import torch

    floating = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel()]
    if not floating or not isinstance(out64, torch.Tensor) or out64.dtype != torch.float64 or not out64.numel():
        return None
    total = sum(inputs[i].numel() for i in floating)
    gen = torch.Generator(device=inputs[floating[0]].device).manual_seed(seed)
    finite = torch.isfinite(out64)
    rms = float(out64[finite].square().mean().sqrt()) if bool(finite.any()) else 0.0
    still = MOVED * out64.abs().clamp(min=rms if rms > 0 else 1.0)

    def stayed(share: float) -> Any:
        out = run(_perturbed(inputs, floating, share, gen))
        if not isinstance(out, torch.Tensor) or out.shape != out64.shape:
            return None
        return ((out - out64).abs() <= still) | (torch.isnan(out) & torch.isnan(out64)) | (out == out64)

    every = stayed(1.0)  # every input moved: the elements that can move at all
    if every is None:
        return None
    movable = ~every
    if not bool(movable.any()):
        return 1
    few = int(movable.sum()) < 256  # few elements (or rows that move together): average more probes
    for share in SHARES:
        if share * total < 1:
            return total  # the shares before moved nearly every element: it depends on about all inputs
        shares = []
        for _ in range(REPEATS):
            still_here = stayed(share)
            if still_here is None:
                return None
            shares.append(float(still_here[movable].double().mean()))
            if shares[0] < 0.02 and not few:
                break
        unchanged = sum(shares) / len(shares)
        if unchanged >= 0.02:
            return min(total, max(1, round(math.log(unchanged) / math.log1p(-share))))
    return min(total, round(math.log(0.02) / math.log1p(-SHARES[-1])))


def _perturbed(inputs: list[Any], floating: list[int], share: float, gen: Any) -> list[Any]:
    import torch

    out = list(inputs)
    for i in floating:
        x = inputs[i]
        scale = x.abs() + float(x.double().square().mean().sqrt())
        mask = torch.rand(x.shape, generator=gen, device=x.device) < share
        out[i] = torch.where(mask, x + (STEP * scale).to(x.dtype), x)
    return out


def cached_fan_in(build_cache: str | None, problem_file: str, shape: dict[str, Any], seed: int,
                  measure: Callable[[], int | None]) -> int | None:
    """The fan-in of a problem's shape from the cache, else `measure()`d and kept (None is not kept)."""
    path = None
    if build_cache:
        key = json.dumps([Path(problem_file).read_text(encoding="utf-8"), shape, seed], sort_keys=True, default=str)
        path = Path(build_cache) / "fan-in" / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"
        try:
            held = jsontext.loads(path.read_text(encoding="utf-8")).get("fan_in")
            if isinstance(held, int) and not isinstance(held, bool) and held >= 1:
                return held
        except (OSError, ValueError, AttributeError):  # none yet, or unreadable: measured again
            pass
    n = measure()
    if n is not None and path is not None:
        write_json(path, {"fan_in": n})
    return n
