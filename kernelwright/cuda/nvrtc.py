"""Compile device code with NVRTC (cuda-bindings + nvidia-cuda-nvrtc): works on any machine, no GPU.

Results are cached by the SHA-256 of (source, options) in memory; `compile_many` runs the
compiles in a thread pool (NVRTC releases the GIL while it compiles).
"""

from __future__ import annotations

import hashlib
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from kernelwright.cuda.device_code import device_source

DEFAULT_ARCH = "compute_90"


@dataclass(frozen=True)
class NvrtcResult:
    ok: bool
    log: str
    compile_s: float
    ptx_bytes: int


@lru_cache(maxsize=1)
def include_dirs() -> tuple[str, ...]:
    """Shims for host-libc headers first, then the CUDA headers from the nvidia-cuda-runtime wheel."""
    dirs = [str(resources.files("kernelwright.cuda") / "nvrtc_shims")]
    try:
        import nvidia.cu13  # type: ignore[import-not-found]

        dirs.append(str(Path(next(iter(nvidia.cu13.__path__))) / "include"))
    except ImportError:
        pass
    return tuple(dirs)


def program_log(nvrtc, prog) -> str:
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


def run_nvrtc(nvrtc, source: str, name: str, options: list[bytes]) -> Compiled:
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


@lru_cache(maxsize=4096)
def _compile_cached(digest: str, source: str, arch: str) -> NvrtcResult:
    from cuda.bindings import nvrtc

    opts = [f"--gpu-architecture={arch}".encode(), b"-std=c++17", b"--device-as-default-execution-space"]
    opts += [f"-I{d}".encode() for d in include_dirs()]
    done = run_nvrtc(nvrtc, source, "candidate.cu", opts)
    return NvrtcResult(ok=done.ok, log=done.log, compile_s=done.seconds, ptx_bytes=done.ptx_bytes)


def compile_device_code(cuda_source: str, arch: str = DEFAULT_ARCH, strip_host: bool = True) -> NvrtcResult:
    """NVRTC-compile the device half of a CUDA source (the whole source if `strip_host` is False)."""
    source = device_source(cuda_source) if strip_host else cuda_source
    digest = hashlib.sha256(f"{arch}\0{source}".encode()).hexdigest()
    return _compile_cached(digest, source, arch)


def compile_many(sources: list[str], workers: int = 2, arch: str = DEFAULT_ARCH) -> list[NvrtcResult]:
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(lambda s: compile_device_code(s, arch), sources))
