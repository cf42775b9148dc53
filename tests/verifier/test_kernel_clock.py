"""The profiler's clock bounds the timer: a native timer patch on a short kernel cannot claim a speedup."""

from __future__ import annotations

import pytest

from kernelwright.verifier.isolation import Rejected
from kernelwright.verifier.kernel_clock import (
    KERNEL_CLOCK_SUPPORT,
    below_kernel_clock,
    kernel_clock_rejection,
    kernel_supported_speedup,
)
from kernelwright.verifier.timing import bounded_speedup


@pytest.mark.parametrize(("median_ms", "kernel_ms"), [
    (0.0105, 0.0100),  # an honest 10 us kernel: its events bracket its kernels
    (0.0080, 0.0100),  # event granularity and a stretched profiled kernel
    (0.0030, 0.0030),  # launch-bound
    (0.38, 0.52),  # time slicing stretched the profiled durations
    (0.0, 0.0015),  # under the floor: nothing to tell
])
def test_honest_timers_are_not_below_the_kernel_clock(median_ms: float, kernel_ms: float) -> None:
    assert not below_kernel_clock(median_ms, kernel_ms)


@pytest.mark.parametrize(("median_ms", "kernel_ms"), [(0.000001, 0.010), (0.001, 0.38), (0.05, 0.31)])
def test_a_patched_timer_is_below_it(median_ms: float, kernel_ms: float) -> None:
    assert below_kernel_clock(median_ms, kernel_ms)
    assert isinstance(kernel_clock_rejection(median_ms, kernel_ms), Rejected)


def test_the_8744x_of_a_patched_10us_timer_is_not_reported() -> None:
    """A 10 us kernel whose timer reads 1 ns: the wall clock's bound supports any time below its
    floor, so only the profiler's kernel time caps the figure."""
    ref_ms, median, wall, kernel_ms = 0.0092, 0.000001, 0.03, 0.0101
    unbounded = bounded_speedup(ref_ms, median, wall)
    assert unbounded is not None and unbounded > 1000
    capped = kernel_supported_speedup(ref_ms, unbounded, kernel_ms)
    assert capped == pytest.approx(ref_ms / (kernel_ms / KERNEL_CLOCK_SUPPORT))
    assert capped is not None and capped < 2


def test_an_honest_speedup_is_left_as_it_is() -> None:
    assert kernel_supported_speedup(1.0, 2.5, 0.39) == 2.5
    assert kernel_supported_speedup(1.0, None, 0.39) is None
    assert kernel_supported_speedup(1.0, 3.0, 0.0) == 3.0
