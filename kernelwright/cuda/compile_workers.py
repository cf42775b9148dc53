"""Compiles under limits: compiler subprocesses, NVRTC worker processes, and the result cache.

- `run_limited`: a compiler command in its own process group, with `RLIMIT_AS` (memory) and
  `RLIMIT_CPU` set in the child before exec, and a wall-clock timeout that kills the group.
- `NvrtcPool`: NVRTC runs in long-lived worker processes (`python -m kernelwright.cuda.nvrtc_worker`,
  one JSON line per request and reply) started with `RLIMIT_AS`; each request carries a CPU-time
  budget that the worker sets as its own soft `RLIMIT_CPU`, and the parent waits at most the
  wall timeout for the reply: a worker past either limit is killed and replaced.
- `cache_get` / `cache_put`: one JSON file per result under `<cache_dir>/results/`, by content hash,
  written atomically; only definite results (compiled or not, within the limits) are kept.
- `COMPILES`: how many compiles really ran, by stage (cache hits do not count).
"""

from __future__ import annotations

import atexit
import collections
import json
import math
import os
import queue
import resource
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from kernelwright import atomic

COMPILES: collections.Counter[str] = collections.Counter()
_COUNT_LOCK = threading.Lock()
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


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
        _kill_group(proc)
        out, _ = proc.communicate()
        rc = None
    text = out.decode("utf-8", "replace")
    return Outcome(rc, text, time.perf_counter() - start, _limit_hit(rc, text))


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


# ------------------------------------------------------------------------------------- NVRTC


@lru_cache(maxsize=1)
def load_nvrtc() -> Any:
    """The NVRTC bindings (cuda-bindings + nvidia-cuda-nvrtc); raises when they cannot load."""
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"nvrtcVersion failed: {err}")
    return nvrtc


def nvrtc_version() -> str | None:
    """"major.minor" of the NVRTC that loads here, or None when it cannot load on this machine."""
    try:
        nvrtc = load_nvrtc()
    except Exception:  # noqa: BLE001 - any failure to load means NVRTC is unavailable
        return None
    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


class _Worker:
    def __init__(self, memory_mb: int) -> None:
        self.home = tempfile.mkdtemp(prefix="kw_nvrtc_")  # empty cwd: quoted includes find nothing here
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([_PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen([sys.executable, "-m", "kernelwright.cuda.nvrtc_worker"], cwd=self.home,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, preexec_fn=limiter(Limits(0, memory_mb)),
                                     start_new_session=True)

    def request(self, payload: dict[str, Any], timeout_s: float) -> dict[str, Any] | str:
        """The worker's reply, or why there is none ("timeout", "died"); the worker is then dead."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write((json.dumps(payload) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return "died"
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s if timeout_s > 0 else None)
        if not ready:
            return "timeout"
        line = self.proc.stdout.readline()
        if not line:
            return "died"
        reply: dict[str, Any] = json.loads(line)
        return reply

    def close(self) -> None:
        _kill_group(self.proc)
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        try:
            os.rmdir(self.home)
        except OSError:
            pass


def _death(worker: _Worker) -> str:
    try:
        rc = worker.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return "crashed"
    return "cpu_limit" if rc in (-signal.SIGXCPU, -signal.SIGKILL) else "crashed"


class NvrtcPool:
    """Up to `size` NVRTC worker processes, started on demand, replaced when a limit kills one."""

    def __init__(self, size: int, memory_mb: int) -> None:
        self.size = max(1, size)
        self.memory_mb = memory_mb
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._started = 0
        self._lock = threading.Lock()
        self._all: set[_Worker] = set()

    def _acquire(self) -> _Worker:
        with self._lock:
            if self._idle.empty() and self._started < self.size:
                self._started += 1
                worker = _Worker(self.memory_mb)
                self._all.add(worker)
                return worker
        return self._idle.get()

    def _retire(self, worker: _Worker) -> None:
        """Kill a worker stopped by a limit and put a fresh one in its place (a caller may be
        waiting for an idle worker)."""
        worker.close()
        fresh = _Worker(self.memory_mb)
        with self._lock:
            self._all.discard(worker)
            self._all.add(fresh)
        self._idle.put(fresh)

    def compile(self, source: str, name: str, options: list[str], timeout_s: float) -> dict[str, Any]:
        """{"status", "log", "seconds"} of one NVRTC compile; "limit" is set when a limit stopped it."""
        worker = self._acquire()
        start = time.perf_counter()
        reply = worker.request({"source": source, "name": name, "options": options, "cpu_s": timeout_s},
                               timeout_s)
        if isinstance(reply, dict):
            self._idle.put(worker)
            return reply
        limit = "timeout" if reply == "timeout" else _death(worker)
        self._retire(worker)
        return {"status": "failed", "log": "", "seconds": time.perf_counter() - start, "limit": limit}

    def close(self) -> None:
        with self._lock:
            workers, self._all = list(self._all), set()
            self._started = 0
        for w in workers:
            w.close()


_POOLS: dict[tuple[int, int], NvrtcPool] = {}
_POOLS_LOCK = threading.Lock()


def nvrtc_pool(size: int, memory_mb: int) -> NvrtcPool:
    """The process-wide pool for these settings (workers stay up between checks)."""
    with _POOLS_LOCK:
        pool = _POOLS.get((size, memory_mb))
        if pool is None:
            pool = _POOLS[(size, memory_mb)] = NvrtcPool(size, memory_mb)
        return pool


@atexit.register
def close_pools() -> None:
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        pool.close()


# ------------------------------------------------------------------------------------- cache


def _cache_path(cache_dir: Path, key: str) -> Path:
    return cache_dir / "results" / key[:2] / f"{key}.json"


def cache_get(cache_dir: Path, key: str) -> dict[str, Any] | None:
    try:
        data = json.loads(_cache_path(cache_dir, key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # absent or unreadable: compile again
    return data if isinstance(data, dict) else None


def cache_put(cache_dir: Path, key: str, data: dict[str, Any]) -> None:
    atomic.write_json(_cache_path(cache_dir, key), data)
