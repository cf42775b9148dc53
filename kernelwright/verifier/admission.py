"""GPU memory admission: a candidate starts only when its memory estimate fits beside the others'.

Every verification on a host shares one ledger per GPU (`host_gpu_ledger`: the workers of one
evaluation, several evaluations side by side, the Ray tasks of a node): a JSON file, read and
written under an exclusive lock, of the candidates that hold GPU memory (an estimate each) and of
those waiting, in order of arrival.

- `estimate_bytes`: a candidate's GPU memory: the reference's peak (measured once per problem by
  its first judge, `reference_peak`, and cached: `read_peak` / `write_peak`) times PEAK_FACTOR,
  plus the judge's and the runner's CUDA contexts; a problem not measured yet is estimated at
  UNKNOWN_PEAK_BYTES until its judge has measured it and corrected its hold (`Ledger.update`);
- `admits`: the rule: nobody holds memory, or the candidate's estimate fits beside the holders'
  within `capacity` and within the GPU's free memory; an `alone` candidate waits for an empty GPU
  and keeps everyone else out while it runs;
- `Ledger.admitted`: waits in line, holds, releases on exit; the hold records the most other
  candidates that held memory at once while it did (`others`: a verdict reached beside them says
  so, and an out-of-memory among them is tried again alone). First come, first admitted, except
  that a candidate that fits may pass those ahead of it that do not, while each of them has waited
  less than PATIENCE_S: a big estimate, or one that must run alone, would otherwise keep every
  later candidate off the GPU until the longest holder ends (a hang holds its memory until its
  time limit), and the GPU idles; past its patience the one ahead is served first again;
- `gpu_memory`: the GPU's total and free bytes through NVML, so the parent opens no CUDA context.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import itertools
import json
import os
import re
import secrets
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelwright import atomic, jsontext
from kernelwright.verifier.seeding import seed_all
from kernelwright.verifier.timing import TIMED_MEMORY_BYTES

# The reference's peak is measured in float32 alone; a candidate's judge also holds the float64 twin
# (twice the bytes), and its runner the candidate, its inputs and the outputs it returns: one for the
# reference, two for the twin, one for the candidate, one for the outputs and clones held to compare.
PEAK_FACTOR = 5.0
CONTEXT_BYTES = 1 << 30  # one process's CUDA context, torch's kernels and cuBLAS's workspace; two per candidate
UNKNOWN_PEAK_BYTES = 512 << 20  # a problem's peak before its first judge has measured it
USABLE_SHARE = 0.9  # of the GPU's memory; the rest is left to the driver and to what runs beside verification
# Timing runs one candidate at a time (the timing lock): its fresh input sets and kept outputs in the
# runner, and the reference's sets in the judge, are kept free once for all instead of in every estimate.
TIMING_RESERVE_BYTES = 3 * TIMED_MEMORY_BYTES
POLL_S = 0.1
PATIENCE_S = 120.0  # how long a waiter lets later candidates that fit pass it before it is served first

GpuMemory = Callable[[], "tuple[int, int] | None"]  # (total, free) bytes, None where unknown


def estimate_bytes(peak: int | None) -> int:
    """A candidate's GPU memory from its reference's measured peak (None: not measured yet)."""
    return int(PEAK_FACTOR * (UNKNOWN_PEAK_BYTES if peak is None else peak)) + 2 * CONTEXT_BYTES


def capacity(total: int) -> int:
    """What the holders' estimates may add up to on a GPU of `total` bytes."""
    return max(int(USABLE_SHARE * total) - TIMING_RESERVE_BYTES, 0)


@dataclass
class Hold:
    """One candidate's place in the ledger: its estimate, whether it runs alone, the most other
    holders there were at once while it held memory."""

    token: str
    pid: int
    bytes: int
    alone: bool = False
    others: int = 0
    queued_at: float = 0.0  # when it joined the line (epoch seconds); 0: from an older ledger, served first


def admits(holders: list[Hold], want: Hold, memory: tuple[int, int] | None) -> bool:
    """Whether `want` may start beside `holders` on a GPU of `memory` (total, free bytes; None:
    unknown, and only `alone` holds anyone back)."""
    if not holders:
        return True
    if want.alone or any(h.alone for h in holders):
        return False
    if memory is None:
        return True
    total, free = memory
    return sum(h.bytes for h in holders) + want.bytes <= capacity(total) and want.bytes <= free


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Ledger:
    """The ledger file at `path` (its lock beside it). `memory`, `alive` and `clock` are the GPU's
    memory, whether a pid lives and the time a wait is measured by (seconds since the epoch, shared by
    every process): NVML, the process table and `time.time`, stood in for by tests."""

    def __init__(self, path: Path, memory: GpuMemory | None = None, alive: Callable[[int], bool] = _alive,
                 poll_s: float = POLL_S, patience_s: float = PATIENCE_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.path, self.memory, self.alive, self.poll_s = path, memory or gpu_memory, alive, poll_s
        self.patience_s, self.clock = patience_s, clock

    @contextlib.contextmanager
    def _state(self) -> Iterator[dict[str, Any]]:
        """The ledger under its lock, its holders and waiters of dead processes dropped; written back."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{self.path}.lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                state = self._read()
                state["holders"] = {t: h for t, h in state["holders"].items() if self.alive(h.pid)}
                state["queue"] = [w for w in state["queue"] if self.alive(w.pid)]
                yield state
                atomic.write_json(self.path, {"holders": [asdict(h) for h in state["holders"].values()],
                                              "queue": [asdict(w) for w in state["queue"]]})
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self) -> dict[str, Any]:
        try:
            data = jsontext.loads(self.path.read_text())
            holders = [Hold(**h) for h in data["holders"]]
            queue = [Hold(**w) for w in data["queue"]]
        except (OSError, ValueError, KeyError, TypeError):  # none yet, or unreadable: start afresh
            holders, queue = [], []
        return {"holders": {h.token: h for h in holders}, "queue": queue}

    def _try(self, want: Hold) -> bool:
        """Admit `want` if it fits and everyone ahead of it in line may still be passed (has waited
        less than `patience_s`); else keep its place in line."""
        with self._state() as state:
            holders: dict[str, Hold] = state["holders"]
            queue: list[Hold] = state["queue"]
            now = self.clock()
            if all(w.token != want.token for w in queue):
                want.queued_at = now
                queue.append(want)
            ahead = list(itertools.takewhile(lambda w: w.token != want.token, queue))
            if any(now - w.queued_at >= self.patience_s for w in ahead):
                return False
            if not admits(list(holders.values()), want, self.memory()):
                return False
            queue.pop(len(ahead))
            want.others = len(holders)
            for h in holders.values():
                h.others = max(h.others, len(holders))
            holders[want.token] = want
            return True

    @contextlib.contextmanager
    def admitted(self, estimate: int, alone: bool = False) -> Iterator[Hold]:
        """Wait in line until admitted, then hold `estimate` bytes until the block ends; the yielded
        hold's `others` is brought up to date on release."""
        want = Hold(secrets.token_hex(8), os.getpid(), estimate, alone)
        try:
            while not self._try(want):
                time.sleep(self.poll_s)
            yield want
        finally:
            with self._state() as state:
                state["queue"] = [w for w in state["queue"] if w.token != want.token]
                held = state["holders"].pop(want.token, None)
            if held is not None:
                want.others = held.others

    def update(self, token: str, estimate: int) -> None:
        """A holder's estimate corrected (its judge measured the reference's peak)."""
        with self._state() as state:
            if token in state["holders"]:
                state["holders"][token].bytes = estimate

    def others(self, token: str | None) -> int:
        """How many other candidates hold GPU memory now."""
        with self._state() as state:
            return sum(t != token for t in state["holders"])


def _first_visible() -> str:
    """The first visible GPU as CUDA_VISIBLE_DEVICES names it: an index, a UUID or a MIG slice; "0" when unset."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"


def visible_gpu() -> str:
    """The first visible GPU (`_first_visible`) made safe for a file name: the key of what the processes
    using one GPU share on this host."""
    return re.sub(r"[^A-Za-z0-9-]", "_", _first_visible())


def host_gpu_ledger() -> str:
    """The ledger every verification of this user on this host's GPU shares (the first visible one)."""
    return str(Path(tempfile.gettempdir()) / f"kw_gpu_memory_{os.getuid()}_{visible_gpu()}.json")


class _NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def gpu_memory() -> tuple[int, int] | None:
    """(total, free) bytes of the first visible GPU through NVML (by index or UUID as
    CUDA_VISIBLE_DEVICES names it); None without NVML, on a MIG slice, or on any NVML error."""
    device = _first_visible()
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    if nvml.nvmlInit_v2() != 0:
        return None
    try:
        handle, memory = ctypes.c_void_p(), _NvmlMemory()
        if device.startswith("GPU-"):
            found = nvml.nvmlDeviceGetHandleByUUID(device.encode(), ctypes.byref(handle))
        elif device.isdigit():
            found = nvml.nvmlDeviceGetHandleByIndex_v2(int(device), ctypes.byref(handle))
        else:  # a MIG slice: its memory is not the device's
            return None
        if found != 0 or nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory)) != 0:
            return None
        return int(memory.total), int(memory.free)
    finally:
        nvml.nvmlShutdown()


# ---------------------------------------------------------------- the reference's peak, per problem


def peak_path(build_cache: str | None, problem: str) -> Path | None:
    """Where a problem's reference peak is cached: by the problem file's text and the torch version."""
    import torch

    if not build_cache:
        return None
    try:
        text = Path(problem).read_text(encoding="utf-8")
    except OSError:
        return None
    key = hashlib.sha256(json.dumps([text, torch.__version__]).encode()).hexdigest()[:24]
    return Path(build_cache) / "ref-memory" / f"{key}.json"


def read_peak(build_cache: str | None, problem: str) -> int | None:
    path = peak_path(build_cache, problem)
    try:
        peak = jsontext.loads(path.read_text())["peak_bytes"] if path is not None else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return peak if type(peak) is int and peak >= 0 else None


def write_peak(build_cache: str | None, problem: str, peak: int) -> None:
    path = peak_path(build_cache, problem)
    if path is not None:
        atomic.write_json(path, {"peak_bytes": int(peak)})


def reference_peak(problem: ModuleType, shapes: list[dict[str, Any]], seed: int) -> int:
    """The GPU memory (bytes) the reference takes in float32 beyond what this process held already:
    the most the caching allocator reserved while it was built and run on a draw of each shape."""
    import torch

    from kernelwright.verifier.inputs import DISTRIBUTIONS, draw_check_inputs

    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_reserved()
    torch.cuda.reset_peak_memory_stats()
    with torch.no_grad():
        for shape in shapes:
            seed_all(seed)
            model = problem.Model(*problem.get_init_inputs()).cuda().eval()
            out = model(*draw_check_inputs(problem, shape, seed, DISTRIBUTIONS[0]))
            del model, out
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_reserved() - base
    torch.cuda.empty_cache()
    return max(int(peak), 0)
