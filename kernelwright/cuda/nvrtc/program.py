"""NVRTC itself (cuda-bindings + nvidia-cuda-nvrtc): load it, find its headers, compile one program.

Runs on any machine, no GPU. `run_nvrtc` is what a worker process (worker.py) calls for each
request; `nvrtc_version` is how the parent learns, without compiling, whether NVRTC loads here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

DEFAULT_ARCH = "compute_90"


@lru_cache(maxsize=1)
def include_dirs() -> tuple[str, ...]:
    """Shims for host-libc headers first, then the CUDA headers from the nvidia-cuda-runtime wheel."""
    dirs = [str(resources.files("kernelwright.cuda") / "nvrtc_shims")]
    try:
        import nvidia.cu13  # type: ignore[import-not-found]
    except ImportError:
        return tuple(dirs)
    # nvidia.cu13 is a namespace package: its portions hold the runtime's, CCCL's, NVRTC's... headers,
    # possibly in several folders on sys.path; the one NVRTC needs has the runtime's half types
    found = cuda_runtime_include([Path(p) for p in nvidia.cu13.__path__])
    return tuple(dirs + ([str(found)] if found else []))


def cuda_runtime_include(portions: list[Path]) -> Path | None:
    """The `include` folder, among a namespace package's portions, that holds the CUDA runtime headers
    NVRTC programs include (`cuda_fp16.h`); else the first portion's, else None."""
    includes = [p / "include" for p in portions]
    return next((d for d in includes if (d / "cuda_fp16.h").is_file()), includes[0] if includes else None)


@lru_cache(maxsize=1)
def load_nvrtc() -> Any:
    """The NVRTC bindings; raises when they cannot load."""
    from cuda.bindings import nvrtc

    err, _, _ = nvrtc.nvrtcVersion()
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


def program_log(nvrtc: Any, prog: Any) -> str:
    """The compile log. NVRTC writes into the buffer it is given; an empty log is 1 byte, and a
    1-byte `bytes` is CPython's shared singleton: writing into it corrupts every b" " in the
    process (torch.load then misreads checkpoints). So skip empty logs and use a fresh buffer."""
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    if size <= 1:
        return ""
    buf = bytes(bytearray(size))  # a new object of `size` >= 2 bytes, never a cached one
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.decode("utf-8", "replace").rstrip("\x00 \n")


@dataclass(frozen=True)
class Compiled:
    """One NVRTC compile: its result code, log, seconds and PTX size (0 unless it compiled)."""

    err: object
    ok: bool
    log: str
    seconds: float
    ptx_bytes: int


def run_nvrtc(nvrtc: Any, source: str, name: str, options: list[bytes]) -> Compiled:
    """Compile `source` (named `name` in the log) with `options`; the program is always destroyed."""
    start = time.perf_counter()
    _, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(options), options)
        elapsed = time.perf_counter() - start
        ok = err == nvrtc.nvrtcResult.NVRTC_SUCCESS
        ptx_size = nvrtc.nvrtcGetPTXSize(prog)[1] if ok else 0
        return Compiled(err, ok, program_log(nvrtc, prog), elapsed, int(ptx_size))
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
