"""The kernel share: how much of the candidate's GPU time its own kernels take, and how sure that is.

The runner measures it (profiling.custom_share: one profiler pass of 3 forwards, the share of the
GPU kernel time that CUPTI recorded in kernels named like the candidate's `__global__` functions).
A pass traces every kernel, so the share has no sampling error; it moves with the kernels' own
durations: clocks, the caches' state, and other processes' kernels on the GPU (a kernel that is
switched out for another context's time slice is recorded longer), which stretch some kernels more
than others. A verdict decided by a share near `min_custom_share` could then differ between two
runs; so a first pass within SHARE_BAND of the threshold (as a factor of it) is followed by
SHARE_BORDERLINE_PASSES more, taken one at a time with other candidates' timings (the timing lock),
and the median of all passes decides; the verdict carries their spread
(`custom_kernel_time_share_spread`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernelwright.verifier.channel import ChannelBroken, field
from kernelwright.verifier.gpu_gate import gpu_step, timing_held
from kernelwright.verifier.spec import Spec

if TYPE_CHECKING:  # judge_timing imports this module
    from kernelwright.verifier.link import Link

SHARE_BAND = (0.5, 2.0)
SHARE_BORDERLINE_PASSES = 6


def borderline(share: float, threshold: float) -> bool:
    return threshold > 0 and SHARE_BAND[0] * threshold <= share <= SHARE_BAND[1] * threshold


@dataclass(frozen=True)
class Profiled:
    share: float  # median share of the passes
    spread: float | None  # their max - min; None after one pass
    kernel_ms: float  # median GPU kernel milliseconds per call that CUPTI recorded (every kernel of the forward)


def _numbers(reply: dict[str, Any], key: str, n: int, top: float) -> list[float]:
    values = field(reply, key, list)
    if len(values) != n or not all(isinstance(x, int | float) and not isinstance(x, bool) and 0.0 <= x <= top
                                   for x in values):
        raise ChannelBroken(f"{key} {str(values)[:80]} for {n} pass(es)")
    return [float(x) for x in values]


def kernel_share(link: Link, call: dict[str, Any], spec: Spec, names: list[str]) -> Profiled:
    """One profiler pass, and more under the timing lock where the first's share lies near
    `min_custom_share`."""

    def passes(n: int) -> tuple[list[float], list[float]]:
        reply = link.ask("share", **call, seed=spec.timing_seed - 1, names=names, passes=n)
        return _numbers(reply, "shares", n, 1.0), _numbers(reply, "kernel_ms", n, 1e7)

    with gpu_step(spec.timing_lock, spec.gpu_gate):
        shares, kernel_ms = passes(1)
    if borderline(shares[0], spec.min_custom_share):
        with timing_held(spec.timing_lock, spec.gpu_gate):
            more, more_ms = passes(SHARE_BORDERLINE_PASSES)
        shares, kernel_ms = shares + more, kernel_ms + more_ms
    return Profiled(statistics.median(shares), (max(shares) - min(shares)) if len(shares) > 1 else None,
                    statistics.median(kernel_ms))


def kernel_ms_alone(link: Link, call: dict[str, Any], spec: Spec, names: list[str]) -> float:
    """One more profiler pass under the timing lock: the kernel time per call with no other timing beside it."""
    with timing_held(spec.timing_lock, spec.gpu_gate):
        reply = link.ask("share", **call, seed=spec.timing_seed - 1, names=names, passes=1)
    return _numbers(reply, "kernel_ms", 1, 1e7)[0]
