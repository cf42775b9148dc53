"""NVRTC compile of each sample's device code, on the CPU, in parallel, cached on disk by content.

    kernelwright curate --input corpus.jsonl --workers 2 --nvrtc-arch compute_90 --workdir WD --out DIR

The device half of a sample's CUDA source (`device_code.device_source`) is compiled by
`nvrtc_check.compile_device_code` in a process pool. Each result is kept as
`<cache_dir>/<sha256 of arch and device source>.json` (written atomically), so a second run over
the same corpus compiles nothing.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from kernelwright import atomic
from kernelwright.cuda.device_code import device_source
from kernelwright.cuda.nvrtc import DEFAULT_ARCH, NvrtcResult, compile_device_code


@dataclass
class CompileStats:
    compiled: int = 0
    cache_hits: int = 0


def source_digest(device_src: str, arch: str) -> str:
    return hashlib.sha256(f"{arch}\0{device_src}".encode()).hexdigest()


def _cached(path: Path) -> NvrtcResult | None:
    try:
        return NvrtcResult(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None  # absent or unreadable: compile again


def _compile(src: str, arch: str) -> NvrtcResult:
    return compile_device_code(src, arch, strip_host=False)


def compile_all(items: Sequence[tuple[str, str]], cache_dir: Path, workers: int = 2,
                arch: str = DEFAULT_ARCH) -> tuple[dict[str, NvrtcResult], CompileStats]:
    """(id, CUDA source) items -> {id: NVRTC result}, compiling only what the cache lacks."""
    stats = CompileStats()
    digests: dict[str, str] = {}
    results: dict[str, NvrtcResult] = {}
    todo: dict[str, str] = {}  # digest -> device source
    for key, src in items:
        device = device_source(src)
        digests[key] = source_digest(device, arch)
        hit = _cached(cache_dir / f"{digests[key]}.json")
        if hit is not None:
            results[key] = hit
            stats.cache_hits += 1
        else:
            todo.setdefault(digests[key], device)
    if todo:
        fresh = _run_pool(list(todo.values()), workers, arch)
        for digest, res in zip(todo, fresh, strict=True):
            atomic.write_json(cache_dir / f"{digest}.json", asdict(res))
        by_digest = dict(zip(todo, fresh, strict=True))
        for key, _ in items:
            if key not in results:
                results[key] = by_digest[digests[key]]
        stats.compiled = len(todo)
    return results, stats


def _run_pool(sources: list[str], workers: int, arch: str) -> list[NvrtcResult]:
    if workers <= 1 or len(sources) == 1:
        return [_compile(s, arch) for s in sources]
    # fork: children only call NVRTC (no torch, no locks the parent may hold); spawn would need an
    # importable __main__, which `python -` and notebooks lack
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(sources)), mp_context=ctx) as pool:
        return list(pool.map(_compile, sources, [arch] * len(sources), chunksize=4))
