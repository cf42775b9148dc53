"""How busy the machine was while a benchmark phase ran: CPU (from /proc/stat) and GPU (nvidia-smi).

    with Utilisation() as use:
        run_phase()
    use.result()   # {"cpu_busy_share": 0.93, "cpu_core_s": 1210.4, "gpu_util_mean": 0.41, ...}

`cpu_busy_share` is the share of all cores' time not idle or waiting on I/O over the phase;
`cpu_core_s` the busy core-seconds (all processes, the benchmark's own and its children's);
`gpu_util_mean` the mean of nvidia-smi's utilization.gpu (share of time a kernel ran), sampled
every `gpu_every_ms`; None where nvidia-smi is missing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path
from types import TracebackType


def _cpu_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of all cores since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


class Utilisation:
    """A context manager that measures CPU and GPU utilisation between enter and exit."""

    def __init__(self, gpu_every_ms: int = 200) -> None:
        self.gpu_every_ms = gpu_every_ms
        self._start = (0, 0)
        self._end = (0, 0)
        self._smi: subprocess.Popen[str] | None = None
        self._gpu: list[float] = []

    def __enter__(self) -> Utilisation:
        smi = shutil.which("nvidia-smi")
        if smi:
            self._smi = subprocess.Popen([smi, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                                          f"-lms={self.gpu_every_ms}", "-i", "0"],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._start = _cpu_ticks()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._end = _cpu_ticks()
        if self._smi is not None:
            self._smi.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                out, _ = self._smi.communicate(timeout=5)
                self._gpu = [float(x) / 100.0 for x in out.split() if x.replace(".", "", 1).isdigit()]

    def result(self) -> dict[str, float | int | None]:
        busy, total = self._end[0] - self._start[0], self._end[1] - self._start[1]
        hz = os.sysconf("SC_CLK_TCK")
        return {"cpu_busy_share": busy / total if total else None, "cpu_core_s": busy / hz,
                "cores": os.cpu_count() or 1,
                "gpu_util_mean": sum(self._gpu) / len(self._gpu) if self._gpu else None,
                "gpu_samples": len(self._gpu)}
