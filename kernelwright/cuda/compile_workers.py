"""Compiler subprocesses under limits, and the count of compiles that really ran.

- `run_limited`: a compiler command in its own process group, with `RLIMIT_AS` (memory) and
  `RLIMIT_CPU` set in the child before exec (`limiter`), and a wall-clock timeout that kills the
  group (`kill_group`); NVRTC's worker processes (`cuda.nvrtc.pool`) start under the same limits.
- `COMPILES`: how many compiles really ran, by stage (cache hits do not count).
"""

from __future__ import annotations

import collections
import math
import os
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

COMPILES: collections.Counter[str] = collections.Counter()
_COUNT_LOCK = threading.Lock()


def count_compile(stage: str) -> None:
    with _COUNT_LOCK:
        COMPILES[stage] += 1


@dataclass(frozen=True)
class Limits:
    timeout_s: float  # wall clock and CPU time per compile; 0: none
    memory_mb: int  # address space per compiler process; 0: none


@dataclass(frozen=True)
class Outcome:
    returncode: int | None  # None: killed at the wall timeout
    output: str  # stdout and stderr together
    seconds: float
    limit: str | None = None  # "timeout", "cpu_limit" or "memory_limit" when a limit stopped it


def _set_rlimit(kind: int, value: int) -> None:
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, hard))


def limiter(limits: Limits) -> Callable[[], None]:
    """A `preexec_fn` setting the memory and CPU-time limits in the child before exec."""
    memory = limits.memory_mb * 2**20
    cpu = math.ceil(limits.timeout_s) + 1 if limits.timeout_s > 0 else 0

    def apply() -> None:
        if memory:
            _set_rlimit(resource.RLIMIT_AS, memory)
        if cpu:
            _set_rlimit(resource.RLIMIT_CPU, cpu)

    return apply


def _limit_hit(returncode: int | None, output: str) -> str | None:
    if returncode is None:
        return "timeout"
    text = output.lower()
    if returncode in (-signal.SIGXCPU, 128 + signal.SIGXCPU) or "cpu time limit" in text:
        return "cpu_limit"
    if any(s in text for s in ("out of memory", "virtual memory exhausted", "cannot allocate memory",
                               "std::bad_alloc")):
        return "memory_limit"
    return None


def run_limited(cmd: Sequence[str], limits: Limits, cwd: str, env: dict[str, str] | None = None) -> Outcome:
    """Run `cmd` under `limits` (module docstring); never raises on a failing or killed compile."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, preexec_fn=limiter(limits), start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=limits.timeout_s or None)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, _ = proc.communicate()
        rc = None
    text = out.decode("utf-8", "replace")
    return Outcome(rc, text, time.perf_counter() - start, _limit_hit(rc, text))


def kill_group(proc: subprocess.Popen[Any]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
