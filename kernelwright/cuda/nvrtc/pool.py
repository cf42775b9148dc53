"""The NVRTC pool: long-lived worker processes (worker.py) that compile one program at a time each.

Each worker is `python -m kernelwright.cuda.nvrtc.worker`, started on demand (up to the pool's
size) with `RLIMIT_AS` (memory) set before exec, in an empty folder (quoted includes find nothing
there). A request carries a CPU-time budget that the worker sets as its own soft `RLIMIT_CPU`, and
the parent waits at most the wall timeout for the reply: a worker past either limit is killed and
replaced. Workers stay up between compiles, so NVRTC is loaded once per worker, not per compile.
On the seed solutions' device code this beat both threads calling NVRTC in one process and a
process pool forked per batch, by about 1.5x cold (bench/nvrtc_paths.py). `nvrtc_pool` gives the
process-wide pool for a size and memory limit; pools are closed at exit.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kernelwright.cuda.compile_workers import Limits, kill_group, limiter

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])


class _Worker:
    def __init__(self, memory_mb: int) -> None:
        self.home = tempfile.mkdtemp(prefix="kw_nvrtc_")  # empty cwd: quoted includes find nothing here
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([_PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen([sys.executable, "-m", "kernelwright.cuda.nvrtc.worker"], cwd=self.home,
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
        kill_group(self.proc)
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
        """{"status", "log", "seconds"} of one NVRTC compile (worker.py's reply); "limit" is set when a limit
        stopped it. `timeout_s`: wall-clock and CPU-time limit, 0: none."""
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

    def compile_each(self, sources: Sequence[str], name: str, options: list[str],
                     timeout_s: float) -> list[dict[str, Any]]:
        """`compile` of every source, in order, up to `size` compiles at a time."""
        if len(sources) <= 1 or self.size == 1:
            return [self.compile(s, name, options, timeout_s) for s in sources]
        with ThreadPoolExecutor(max_workers=min(self.size, len(sources)), thread_name_prefix="kw-nvrtc") as ex:
            return list(ex.map(lambda s: self.compile(s, name, options, timeout_s), sources))

    def close(self) -> None:
        with self._lock:
            workers, self._all = list(self._all), set()
            self._started = 0
        for w in workers:
            w.close()


_POOLS: dict[tuple[int, int], NvrtcPool] = {}
_POOLS_LOCK = threading.Lock()


def nvrtc_pool(size: int, memory_mb: int) -> NvrtcPool:
    """The process-wide pool for these settings (workers stay up between compiles)."""
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
