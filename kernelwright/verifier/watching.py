"""Watching a judge process: its wall-clock limit and the host memory of it and its runner.

- `rss_bytes`: resident memory of a process and all its descendants;
- `watch`: wait for a process (a `subprocess.Popen` or a fork server's `Spawned`), killing its
  process group past a time limit or past a host-memory limit counted over it, its descendants
  and the pids `also` names (a runner the fork server started is no descendant of its judge).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from typing import IO

from kernelwright.verifier.forkserver import Spawned


def rss_bytes(pid: int) -> int:
    """Resident memory of a process and all its descendants (the judge and its runner); 0 once gone."""
    total, todo, seen = 0, [pid], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        total += _own_rss(current)
        todo += _children(current)
    return total


def _own_rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                kids += [int(k) for k in fh.read().split()]
    except (OSError, ValueError):
        pass
    return kids


def _no_pids() -> list[int]:
    return []


def watch(proc: subprocess.Popen | Spawned, timeout_s: float, host_memory_bytes: int, err: IO[bytes] | None = None,
          also: Callable[[], list[int]] = _no_pids, poll_s: float = 0.25) -> tuple[str, bytes]:
    """Wait for `proc` (started in a session of its own), killing its process group and the `also`
    pids past `timeout_s` or past `host_memory_bytes` of resident memory (0: no memory limit).
    Returns ("exited" | "timeout" | "host_memory", the end of what it wrote to the file `err`)."""
    deadline = time.monotonic() + timeout_s
    outcome = "exited"
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=poll_s)
            break
        over = host_memory_bytes and sum(rss_bytes(p) for p in [proc.pid, *also()]) > host_memory_bytes
        if over or time.monotonic() > deadline:
            outcome = "host_memory" if over else "timeout"
            for pid in also():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            break
    return outcome, _tail(err)


def _tail(err: IO[bytes] | None, limit: int = 64 * 1024) -> bytes:
    if err is None:
        return b""
    with contextlib.suppress(OSError, ValueError):
        err.seek(0, os.SEEK_END)
        err.seek(max(0, err.tell() - limit))
        return err.read()
    return b""
