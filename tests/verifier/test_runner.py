"""The runner's own checks that need no GPU: a thread the candidate leaves running is caught before
any timing, at the correctness calls, not only when the runner finishes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kernelwright.verifier.isolation import Rejected, thread_count
from kernelwright.verifier.runner import Runner


def test_a_thread_started_after_the_warm_up_is_an_async_escape(tmp_path: Path) -> None:
    runner = Runner({"timing": {}}, tmp_path, end=None)  # type: ignore[arg-type]  # no channel needed
    runner.threads = thread_count()  # as `load` records it once the candidate is loaded and warm
    runner.no_new_threads()
    stop = threading.Event()
    escaped = threading.Thread(target=stop.wait, daemon=True)
    escaped.start()
    try:
        with pytest.raises(Rejected) as caught:
            runner.no_new_threads()
        assert caught.value.reason == "async_escape" and "1 thread" in caught.value.detail
    finally:
        stop.set()
        escaped.join()
    deadline = time.monotonic() + 10.0
    while thread_count() > runner.threads and time.monotonic() < deadline:
        time.sleep(0.01)  # a joined thread's OS task can outlive join() by a moment
    runner.no_new_threads()
