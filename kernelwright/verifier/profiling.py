"""Profiling: how much of the candidate's GPU time is spent in its own kernels.

- `candidate_kernel_names`: the candidate's `__global__` names, as the static checks find them;
- `custom_share`: the share of GPU kernel time in those kernels, from a profiler session (a
  candidate that falls back to torch's kernels has a low one);
- `profiler_started_alongside`: the profiler's costly first session (`_empty_profile`) paid in a
  thread while the candidate builds, instead of on the timing path.

Sessions are torch's autograd profiler on Kineto with CUDA activity only (`cuda_profile`), the
session `torch.profiler.profile(activities=[CUDA])` opens, without that class's `prepare_trace`:
its `hasattr(torch, "_inductor")` imports torch._inductor and torch._dynamo, ~4 CPU-seconds on an
H200 host per runner, for a flag about CUDA graphs that a kernel-time share does not read.
"""

from __future__ import annotations

import contextlib
import re
import threading
from pathlib import Path
from typing import Any

from kernelwright.cuda.static_checks import kernel_names
from kernelwright.pysource import read_python


def candidate_kernel_names(candidate_path: Path) -> set[str]:
    """The candidate's `__global__` names, as the static checks find them (any placement of
    `__launch_bounds__`): the profiler's custom-kernel share counts time in these."""
    return set(kernel_names(read_python(candidate_path)))  # decoded as Python decoded it (its coding line)


PROFILED_CALLS = 3


def custom_share(new: Any, inputs: list[Any], names: set[str]) -> float:
    """Share of GPU kernel time spent in kernels compiled from the candidate's own source."""
    return profiled_kernels(new, inputs, names)[0]


def profiled_kernels(new: Any, inputs: list[Any], names: set[str]) -> tuple[float, float]:
    """(share of GPU kernel time in the candidate's own kernels, GPU kernel milliseconds per call),
    from CUPTI's activity records of PROFILED_CALLS forwards: a clock of the GPU's own that the CUDA
    runtime's event functions, patched or not, do not touch."""
    import torch

    with torch.no_grad(), cuda_profile() as prof:
        for _ in range(PROFILED_CALLS):
            out = new(*inputs)
        read_back(out)  # the session must not stop before the kernels end, whatever waits were replaced
        torch.cuda.synchronize()
    total = own = 0.0
    events = [evt for evt in prof.function_events if evt.device_type == torch.autograd.DeviceType.CUDA]
    copies = [evt for evt in events if evt.name.startswith(READ_BACK_COPY)]
    ours = max(copies, key=lambda evt: evt.time_range.start) if copies else None  # read_back's own copy
    for evt in events:
        if evt is ours:
            continue
        dur = float(getattr(evt, "device_time", 0.0) or 0.0)
        base = re.split(r"[<(]", evt.name)[0].split("::")[-1].strip()
        total += dur
        own += dur if base in names else 0.0
    return (own / total if total > 0 else 0.0), total / 1e3 / PROFILED_CALLS  # device_time is in microseconds


READ_BACK_COPY = "Memcpy DtoH"  # how CUPTI's activity records name a device-to-host copy


def read_back(out: Any) -> None:
    """Copy one element of the output's first tensor to the host: returns only once every kernel
    queued before it on the stream has ended. A candidate can replace the CUDA runtime's and the
    driver's synchronisations natively (they then return at once, and a profiler session stopped
    after them loses the records of kernels still running: a share of 0), but not the copy of its
    own output."""
    import torch

    parts = list(out) if isinstance(out, (tuple, list)) else [out]
    for tensor in (part for part in parts if isinstance(part, torch.Tensor)):
        if tensor.numel():
            tensor.detach().reshape(-1)[-1:].to("cpu")
            return


def cuda_profile() -> Any:
    """A profiler session that records the GPU's kernels only (enter it with `with`)."""
    from torch.autograd.profiler import profile

    return profile(use_cpu=False, use_device="cuda", use_kineto=True)


def _empty_profile() -> None:
    import torch

    with contextlib.suppress(Exception), cuda_profile():
        torch.cuda.synchronize()


@contextlib.contextmanager
def profiler_started_alongside(enabled: bool, join_s: float = 120.0):
    """The profiler's first session (CUPTI's start-up; later ones ~5 ms) paid in a thread while the
    candidate builds (GIL released while the compilers run), not later on the timing path. Joined
    on exit, before the thread count and the timing; on by `enabled` (timing on)."""
    thread = threading.Thread(target=_empty_profile, name="kw-profiler-warm-up", daemon=True) if enabled else None
    if thread is not None:
        thread.start()
    try:
        yield
    finally:
        if thread is not None:
            thread.join(join_s)
