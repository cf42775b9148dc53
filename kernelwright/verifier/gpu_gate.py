"""The GPU gate (`VerifyConfig.gpu_gate`, off by default): while one candidate is timed, the other
candidates' GPU steps wait, so the clock and the trials see no other work on the GPU.

Without it the timing lock keeps two timings apart, but every other candidate's correctness draws
share the GPU with the one being timed; each host read-back of the clock then waits for their time
slices (on an H200 with 15 checks side by side a timed candidate held the lock 6.9 s on average,
for kernels of 0.007-0.7 ms). With it:

- `timing_held(lock, gate)`: the timing lock, held exclusively (as without the gate);
- `gpu_step(lock, gate)`: held around each correctness step that puts work on the GPU (one draw: the
  reference, the candidate's calls, the comparison), shared with every other step, never with a
  timing.

A turnstile beside the lock file (`<lock>.gate`) keeps a timing from waiting forever behind steps
that overlap one another: a timing takes the turnstile, then the lock; a step passes the turnstile
before it takes its share, so it queues behind a timing that is waiting. Neither is ever held inside
the other in one process (flock would wait for itself).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from kernelwright.cuda.host_compile import file_lock

TURNSTILE_SUFFIX = ".gate"


@contextlib.contextmanager
def timing_held(lock_path: str | None, gate: bool = False) -> Iterator[None]:
    """One timing at a time on the host; with the gate, no correctness step beside it either."""
    if lock_path is None:
        yield
    elif not gate:
        with file_lock(Path(lock_path)):
            yield
    else:
        with _past_turnstile(lock_path, shared=False):
            yield


@contextlib.contextmanager
def gpu_step(lock_path: str | None, gate: bool) -> Iterator[None]:
    """A correctness step's share of the GPU: beside other steps, never beside a timing (gate on)."""
    if lock_path is None or not gate:
        yield
    else:
        with _past_turnstile(lock_path, shared=True):
            yield


@contextlib.contextmanager
def _past_turnstile(lock_path: str, shared: bool) -> Iterator[None]:
    """The lock (shared by steps, exclusive for a timing), taken while holding the turnstile and held after
    the turnstile is let go: whoever waits at the turnstile is next."""
    with contextlib.ExitStack() as stack:
        with file_lock(Path(lock_path + TURNSTILE_SUFFIX)):
            stack.enter_context(file_lock(Path(lock_path), shared=shared))
        yield
