"""Three ways to run NVRTC over the seed solutions' device code, cold and warm, on this machine's CPU.

    .venv/bin/python bench/nvrtc_paths.py --json docs/results/nvrtc_paths_cpu.json [--rounds 3] [--workers 2]

The device code of the 72 seed solutions (`device_code.device_source`) is compiled with the same
options by:
- `threads`: a thread pool in this process calling NVRTC (NVRTC releases the GIL), results in a
  dict in memory;
- `fork_pool`: a process pool forked for the batch, each child calling NVRTC, results in one JSON
  file per source;
- `worker_pool`: kernelwright's `cuda.nvrtc.compile_many`: long-lived worker processes
  (`cuda.nvrtc.pool`), results in its cache (`cuda.nvrtc.cache`: memo and JSON files).
Each design runs in a fresh Python process (NVRTC not yet loaded, no worker started): `cold_s` is
the first batch, `warm_s` the same batch again in that process, `warm_disk_s` (where the design
keeps files) a new process reading what the first left. The rounds are interleaved; each design's
median over the rounds counts, and `cold_vs_worker_pool` is its cold median over worker_pool's.
Every design must compile all 72 (`ok`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelwright.cuda.device_code import device_source  # noqa: E402
from kernelwright.cuda.nvrtc.device import compile_many, device_options  # noqa: E402
from kernelwright.cuda.nvrtc.program import load_nvrtc, nvrtc_version, run_nvrtc  # noqa: E402
from kernelwright.cuda.spans import cuda_source_of  # noqa: E402
from kernelwright.seed import load_seed_tasks  # noqa: E402

DESIGNS = ("threads", "fork_pool", "worker_pool")


def device_sources() -> list[str]:
    return [device_source(cuda_source_of(t.solution)) for t in load_seed_tasks()]


def _compile(source: str) -> bool:
    return run_nvrtc(load_nvrtc(), source, "candidate.cu", [o.encode() for o in device_options()]).ok


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def threads(sources: list[str], workers: int, memo: dict[str, bool]) -> list[bool]:
    todo = [s for s in dict.fromkeys(sources) if _digest(s) not in memo]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        memo.update(zip(map(_digest, todo), pool.map(_compile, todo), strict=True))
    return [memo[_digest(s)] for s in sources]


def fork_pool(sources: list[str], workers: int, folder: Path) -> list[bool]:
    found: dict[str, bool] = {}
    for s in sources:
        path = folder / f"{_digest(s)}.json"
        if path.is_file():
            found[_digest(s)] = bool(json.loads(path.read_text())["ok"])
    todo = [s for s in dict.fromkeys(sources) if _digest(s) not in found]
    if todo:
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            for s, ok in zip(todo, pool.map(_compile, todo, chunksize=4), strict=True):
                (folder / f"{_digest(s)}.json").write_text(json.dumps({"ok": ok}))
                found[_digest(s)] = ok
    return [found[_digest(s)] for s in sources]


def worker_pool(sources: list[str], workers: int, folder: Path) -> list[bool]:
    return [r.ok for r in compile_many(sources, workers, cache_dir=folder, strip_host=False).results]


def _timed(run: Callable[[], list[bool]]) -> tuple[float, int]:
    start = time.perf_counter()
    oks = run()
    return time.perf_counter() - start, sum(oks)


def one_design(design: str, workers: int, folder: Path, reread: bool) -> dict[str, Any]:
    """This process's figures for `design` (run in a fresh process by `main`)."""
    sources = device_sources()
    memo: dict[str, bool] = {}
    runs: dict[str, Callable[[], list[bool]]] = {
        "threads": lambda: threads(sources, workers, memo),
        "fork_pool": lambda: fork_pool(sources, workers, folder),
        "worker_pool": lambda: worker_pool(sources, workers, folder),
    }
    first, ok = _timed(runs[design])
    if reread:
        return {"warm_disk_s": first, "ok": ok}
    again, _ = _timed(runs[design])
    return {"cold_s": first, "warm_s": again, "ok": ok}


def _child(design: str, workers: int, folder: Path, reread: bool) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", design, "--workers", str(workers), "--folder", str(folder)]
    out = subprocess.run(cmd + (["--reread"] if reread else []), check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=str(ROOT / "docs" / "results" / "nvrtc_paths_cpu.json"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--child", choices=DESIGNS)
    parser.add_argument("--folder")
    parser.add_argument("--reread", action="store_true")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_design(args.child, args.workers, Path(args.folder), args.reread)))
        return
    rounds: list[dict[str, dict[str, Any]]] = []
    for r in range(args.rounds):
        this: dict[str, dict[str, Any]] = {}
        for design in DESIGNS:
            with tempfile.TemporaryDirectory(prefix="kw_nvrtc_paths_") as tmp:
                this[design] = _child(design, args.workers, Path(tmp), reread=False)
                if design != "threads":
                    this[design] |= _child(design, args.workers, Path(tmp), reread=True)
            print(f"round {r}: {design:12s} {this[design]}", file=sys.stderr)
        rounds.append(this)
    median = {d: {k: round(statistics.median(r[d][k] for r in rounds), 4) for k in rounds[0][d] if k != "ok"}
              for d in DESIGNS}
    base = median["worker_pool"]["cold_s"]
    for d in DESIGNS:
        median[d]["cold_vs_worker_pool"] = round(median[d]["cold_s"] / base, 2)
        median[d]["ok"] = min(r[d]["ok"] for r in rounds)
    report = {"sources": len(device_sources()), "workers": args.workers, "nvrtc": nvrtc_version(),
              "cpus": os.cpu_count(), "machine": platform.machine(), "median": median, "rounds": rounds}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(median, indent=1))


if __name__ == "__main__":
    main()
