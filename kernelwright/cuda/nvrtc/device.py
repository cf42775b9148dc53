"""NVRTC compile of the device code of CUDA sources, through the pool and the cache: on any machine.

    batch = compile_many(sources, workers=2, cache_dir=Path(".kernelwright/cache/nvrtc"))
    batch.results[i].ok, batch.results[i].log, batch.compiled, batch.cache_hits

The device half of each source (`device_code.device_source`) is compiled as one program by the
NVRTC pool (pool.py), `workers` at a time, and each result is kept in the cache (cache.py) under
the key of NVRTC's version, the options and the device source: the same code is compiled once,
whichever stage asks (curation's NVRTC filter, evaluation's `nvrtc_ok`). When NVRTC cannot load
on this machine, `NvrtcUnavailable` says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelwright.cuda.device_code import device_source
from kernelwright.cuda.nvrtc import cache
from kernelwright.cuda.nvrtc.pool import nvrtc_pool
from kernelwright.cuda.nvrtc.program import DEFAULT_ARCH, include_dirs, nvrtc_version
from kernelwright.errors import UsageError

PROGRAM_NAME = "candidate.cu"


class NvrtcUnavailable(UsageError):
    """NVRTC does not load on this machine (cuda-bindings and nvidia-cuda-nvrtc are needed)."""


@dataclass(frozen=True)
class NvrtcResult:
    ok: bool
    log: str
    compile_s: float
    ptx_bytes: int

    @staticmethod
    def from_dict(data: dict[str, Any]) -> NvrtcResult | None:
        """A cached result, or None when it is not one (compile again)."""
        try:
            return NvrtcResult(bool(data["ok"]), str(data["log"]), float(data["compile_s"]), int(data["ptx_bytes"]))
        except (KeyError, TypeError, ValueError):
            return None


@dataclass
class CompileBatch:
    """The results of `compile_many`, in the order of its sources, and where they came from."""

    results: list[NvrtcResult] = field(default_factory=list)
    compiled: int = 0  # distinct device sources compiled now
    cache_hits: int = 0  # sources whose result was already kept


def device_options(arch: str = DEFAULT_ARCH) -> list[str]:
    opts = [f"--gpu-architecture={arch}", "-std=c++17", "--device-as-default-execution-space"]
    return opts + [f"-I{d}" for d in include_dirs()]


def _result(reply: dict[str, Any]) -> tuple[NvrtcResult, bool]:
    """A worker's reply as a result, and whether it is NVRTC's own (not a compile a limit or a crash stopped)."""
    limit = reply.get("limit")
    log = str(reply.get("log", ""))
    if limit:
        log = f"{limit}: the NVRTC worker process stopped before the compile finished" + (f"\n{log}" if log else "")
    ok = reply.get("status") == "ok" and not limit
    return NvrtcResult(ok, log, float(reply.get("seconds", 0.0)), int(reply.get("ptx_bytes", 0))), not limit


def compile_many(sources: Sequence[str], workers: int = 2, arch: str = DEFAULT_ARCH, cache_dir: Path | None = None,
                 strip_host: bool = True) -> CompileBatch:
    """Each source's NVRTC result, compiling only what the cache lacks (`strip_host` False: the whole
    source is device code already). Raises `NvrtcUnavailable` when NVRTC cannot load here."""
    if not sources:
        return CompileBatch()
    version = nvrtc_version()
    if version is None:
        raise NvrtcUnavailable("NVRTC could not be loaded on this machine (cuda-bindings and nvidia-cuda-nvrtc "
                               "are needed)")
    options = device_options(arch)
    device = [device_source(s) if strip_host else s for s in sources]
    keys = [cache.content_key("nvrtc", version, options, d) for d in device]
    batch, found = CompileBatch(), {}
    for key in keys:
        hit = cache.get(cache_dir, key)
        result = NvrtcResult.from_dict(hit) if hit is not None else None
        if result is not None:
            found[key] = result
            batch.cache_hits += 1
    todo = {k: d for k, d in zip(keys, device, strict=True) if k not in found}
    replies = nvrtc_pool(workers, 0).compile_each(list(todo.values()), PROGRAM_NAME, options, 0)
    for key, reply in zip(todo, replies, strict=True):
        if reply.get("status") == "unavailable":
            raise NvrtcUnavailable(str(reply.get("log", "NVRTC could not be loaded in its worker process")))
        result, definite = _result(reply)
        if definite:
            cache.put(cache_dir, key, asdict(result))
        found[key] = result
    batch.compiled = len(todo)
    batch.results = [found[k] for k in keys]
    return batch


def compile_device_code(cuda_source: str, arch: str = DEFAULT_ARCH, strip_host: bool = True,
                        cache_dir: Path | None = None) -> NvrtcResult:
    """NVRTC-compile the device half of a CUDA source (the whole source if `strip_host` is False)."""
    return compile_many([cuda_source], 1, arch, cache_dir, strip_host).results[0]
