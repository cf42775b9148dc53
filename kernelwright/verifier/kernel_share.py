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
from typing import TYPE_CHECKING, Any

from kernelwright.verifier.channel import ChannelBroken, field
from kernelwright.verifier.isolation import exclusive
from kernelwright.verifier.spec import Spec

if TYPE_CHECKING:  # judge_timing imports this module
    from kernelwright.verifier.link import Link

SHARE_BAND = (0.5, 2.0)
SHARE_BORDERLINE_PASSES = 6


def borderline(share: float, threshold: float) -> bool:
    return threshold > 0 and SHARE_BAND[0] * threshold <= share <= SHARE_BAND[1] * threshold


def kernel_share(link: Link, call: dict[str, Any], spec: Spec, names: list[str]) -> tuple[float, float | None]:
    """(median share of the passes, their spread: max - min, None after one pass): one pass, and
    more under the timing lock where the first lies near `min_custom_share`."""

    def passes(n: int) -> list[float]:
        reply = link.ask("share", **call, seed=spec.timing_seed - 1, names=names, passes=n)
        shares = field(reply, "shares", list)
        if len(shares) != n or not all(isinstance(x, int | float) and not isinstance(x, bool) and 0.0 <= x <= 1.0
                                       for x in shares):
            raise ChannelBroken(f"kernel shares {str(shares)[:80]} for {n} pass(es)")
        return [float(x) for x in shares]

    shares = passes(1)
    if borderline(shares[0], spec.min_custom_share):
        with exclusive(spec.timing_lock):
            shares += passes(SHARE_BORDERLINE_PASSES)
    return statistics.median(shares), (max(shares) - min(shares)) if len(shares) > 1 else None
