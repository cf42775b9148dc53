"""The worker's timer: CUDA events through the CUDA runtime directly, not through torch.

- `_cudart`: the libcudart this process (torch and the candidate's extension) already loaded;
- `Timer`: one trial's kernel time on the stream and device-wide, work escaped to side streams
  counted; the CUDA error a launch left pending.

It imports nothing of the harness, so the guard (which holds the timer's class) and the timing
(which times with it) both import it from here.
"""

from __future__ import annotations

import ctypes
from typing import Any


def _cudart() -> ctypes.CDLL:
    """The CUDA runtime this process (torch and the candidate's extension) already loaded."""
    with open("/proc/self/maps") as maps:
        paths = sorted({line.split()[-1] for line in maps if "libcudart" in line and line.split()[-1].startswith("/")})
    if not paths:
        raise RuntimeError("libcudart is not loaded")
    return ctypes.CDLL(paths[0])


class Timer:
    """CUDA events through the runtime directly (not torch.cuda.Event, which a candidate could patch).

    Each trial records an end event on the stream right after the forward, then synchronises the
    whole device and records a second one. The first is the kernel time (as triton's `do_bench`
    measures it); the second includes any work that escaped to other streams. When the two differ
    by more than the sync gap calibrated on a no-op, the escaped work is counted (the device-wide
    figure is used), so side streams cannot hide time and honest kernels are not charged the gap.
    """

    def __init__(self) -> None:
        self.rt = _cudart()
        self.start, self.end, self.device_end = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        for event in (self.start, self.end, self.device_end):
            self.rt.cudaEventCreate(ctypes.byref(event))
        self.gap_ms = float("inf")
        trials = [self._trial(lambda: None, 0) for _ in range(30)]
        gaps = sorted(whole - on_stream for on_stream, whole in trials)
        self.gap_ms = 2.0 * gaps[int(0.9 * len(gaps))] + 0.01
        _ = self.rt.cudaGetLastError  # bound now (ctypes binds on first use), so the guard holds it

    def _elapsed(self, a: ctypes.c_void_p, b: ctypes.c_void_p) -> float:
        ms = ctypes.c_float()
        self.rt.cudaEventElapsedTime(ctypes.byref(ms), a, b)
        return float(ms.value)

    def _trial(self, fn: Any, stream: int) -> tuple[float, float]:
        import torch

        s = ctypes.c_void_p(stream)
        self.rt.cudaEventRecord(self.start, s)
        fn()
        self.rt.cudaEventRecord(self.end, s)
        torch.cuda.synchronize()  # whole device: work on side streams ends before device_end
        self.rt.cudaEventRecord(self.device_end, s)
        self.rt.cudaEventSynchronize(self.device_end)
        return self._elapsed(self.start, self.end), self._elapsed(self.start, self.device_end)

    def time_ms(self, fn: Any, stream: int) -> float:
        on_stream, whole = self._trial(fn, stream)
        return whole if whole - on_stream > self.gap_ms else on_stream

    def pending_error(self) -> int:
        return int(self.rt.cudaGetLastError())
