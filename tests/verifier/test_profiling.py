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


def test_the_profiler_warm_up_leaves_no_import_of_torch_dynamo_to_two_threads() -> None:
    """torch._dynamo's circular imports fail when a build and the warm-up thread import it at once:
    the calling thread imports it before the thread starts."""
    import sys

    from kernelwright.verifier.profiling import profiler_started_alongside

    with profiler_started_alongside(True):
        assert "torch._dynamo" in sys.modules
