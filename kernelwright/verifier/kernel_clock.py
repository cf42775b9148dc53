"""The profiler's clock: the GPU kernel time CUPTI records, a second arbiter of the candidate's timer.

The judge's wall clock (timing.below_bound) cannot vouch for a kernel much shorter than its
floor (TIMER_BOUND_FLOOR_MS, 0.25 ms): a 10 us kernel's timer could read anything under it. The
runner's profiler pass (profiling.profiled_kernels, the same pass as the kernel share) records
every kernel of the forward from CUPTI's activity records, which the CUDA runtime's and driver's
event functions do not touch, patched natively or not. An honest timer brackets those kernels, so
its median is at least their time per call (less clock granularity); a timer that reads under
1/KERNEL_CLOCK_REJECT of it (beyond KERNEL_CLOCK_FLOOR_MS) is profiled again alone (under the
timing lock) and, if it still reads under, `timing_inconsistent`. And no speedup takes the
candidate below 1/KERNEL_CLOCK_SUPPORT of its profiled kernel time, whatever its timer says: the
margin leaves an honest kernel its own figure where other processes' kernels stretched the
profiled durations by time slicing.
"""

from __future__ import annotations

from kernelwright.verifier.isolation import Rejected

KERNEL_CLOCK_REJECT = 3.0
KERNEL_CLOCK_FLOOR_MS = 0.002
KERNEL_CLOCK_SUPPORT = 1.5


def below_kernel_clock(median_ms: float, kernel_ms: float) -> bool:
    """The timer's median reads under what the profiled kernel time allows."""
    return median_ms * KERNEL_CLOCK_REJECT + KERNEL_CLOCK_FLOOR_MS < kernel_ms


def kernel_clock_rejection(median_ms: float, kernel_ms: float) -> Rejected:
    return Rejected("timing_inconsistent", f"the timer read {median_ms:.4f} ms per call, the profiler's kernel "
                                           f"time {kernel_ms:.4f} ms per call (more than {KERNEL_CLOCK_REJECT:g}x "
                                           "above it, profiled again alone)")


def kernel_supported_speedup(ref_ms: float, speedup: float | None, kernel_ms: float) -> float | None:
    """`speedup`, never above what the profiled kernel time supports."""
    floor = kernel_ms / KERNEL_CLOCK_SUPPORT
    if speedup is None or floor <= 0:
        return speedup
    return min(speedup, ref_ms / floor)
