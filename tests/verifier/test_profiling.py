"""Profiling (kernelwright.verifier.profiling), on the CPU."""

from __future__ import annotations

import threading

import torch

from kernelwright.verifier.guard import HarnessGuard
from kernelwright.verifier.profiling import profiler_started_alongside


def test_profiler_warm_up_is_joined_and_not_tampering() -> None:
    """The profiler's first session runs in a thread during the candidate's import; it is over when
    the import is (the profiler's own native threads may stay: the worker counts threads after the
    import), and it changes nothing the guard holds."""
    guard = HarnessGuard()
    with profiler_started_alongside(True):
        torch.ones(4).sum()
    assert "kw-profiler-warm-up" not in {t.name for t in threading.enumerate()}
    guard.check()
