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


def test_profiler_sessions_import_neither_dynamo_nor_inductor() -> None:
    """torch.profiler.profile's prepare_trace imports torch._inductor and torch._dynamo (~4 CPU-s a
    runner): the warm-up and the share's session do without. In a fresh process, since other tests
    import them."""
    import subprocess
    import sys

    code = ("import sys, torch; from kernelwright.verifier.profiling import profiler_started_alongside, "
            "custom_share\nwith profiler_started_alongside(True): torch.ones(4).sum()\n"
            "try: custom_share(lambda x: x + 1, [torch.ones(4)], {'k'})\nexcept Exception: pass\n"
            "print(sorted(m for m in ('torch._dynamo', 'torch._inductor') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stderr[-2000:]


def test_the_share_session_is_held_by_the_guard() -> None:
    """The profiler class the share is measured with is held: a candidate that swaps it is caught."""
    import torch.autograd.profiler as autograd_profiler

    guard = HarnessGuard()
    original = autograd_profiler.profile
    try:
        autograd_profiler.profile = type("profile", (), {})  # type: ignore[misc,assignment]
        assert any("profile" in c for c in guard.changed())
    finally:
        autograd_profiler.profile = original  # type: ignore[misc]
    guard.check()
