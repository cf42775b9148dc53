"""Profiling: how much of the candidate's GPU time is spent in its own kernels.

- `candidate_kernel_names`: the candidate's `__global__` names, as the static checks find them;
- `custom_share`: the share of GPU kernel time in those kernels, from a profiler session (a
  candidate that falls back to torch's kernels has a low one);
- `profiler_started_alongside`: the profiler's costly first session (`_empty_profile`) paid in a
  thread while the candidate builds, instead of on the timing path.
"""

from __future__ import annotations

import contextlib
import re
import threading
from pathlib import Path
from typing import Any

from kernelwright.cuda.static_checks import kernel_names


def candidate_kernel_names(candidate_path: Path) -> set[str]:
    """The candidate's `__global__` names, as the static checks find them (any placement of
    `__launch_bounds__`): the profiler's custom-kernel share counts time in these."""
    return set(kernel_names(candidate_path.read_text(encoding="utf-8")))


def custom_share(new: Any, inputs: list[Any], names: set[str]) -> float:
    """Share of GPU kernel time spent in kernels compiled from the candidate's own source."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            new(*inputs)
        torch.cuda.synchronize()
    total = own = 0.0
    for evt in prof.events():
        if evt.device_type != torch.autograd.DeviceType.CUDA:
            continue
        dur = float(getattr(evt, "device_time", 0.0) or 0.0)
        base = re.split(r"[<(]", evt.name)[0].split("::")[-1].strip()
        total += dur
        own += dur if base in names else 0.0
    return own / total if total > 0 else 0.0


def _empty_profile() -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with contextlib.suppress(Exception), profile(activities=[ProfilerActivity.CUDA]):
        torch.cuda.synchronize()


@contextlib.contextmanager
def profiler_started_alongside(enabled: bool, join_s: float = 120.0):
    """The profiler's first session costs ~4.6 s on an H200 (CUPTI start-up; later ones ~5 ms).
    Pay it in a thread while the candidate builds (GIL released while the compilers run), not
    later on the timing path. Joined on exit, before the thread count and the timing; on by
    `enabled` (timing on)."""
    if enabled:  # torch._dynamo (which the profiler and a build may both import) imported by one thread
        import torch._dynamo  # noqa: F401 - its circular imports fail when two threads import it at once
    thread = threading.Thread(target=_empty_profile, name="kw-profiler-warm-up", daemon=True) if enabled else None
    if thread is not None:
        thread.start()
    try:
        yield
    finally:
        if thread is not None:
            thread.join(join_s)
