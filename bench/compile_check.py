"""Compile-check latency over the seed solutions, with a cold result cache, on this machine's CPU.

    .venv/bin/python bench/compile_check.py --json docs/results/compile_check_cpu.json [--limit N] [--pch-dir DIR]

Each seed solution is checked alone (`check_candidate`, the way a server answers one kernel),
first with the device stage only (`host=False`), then with both stages, each pass on a fresh
result cache, so every check compiles. What is warm, as in a running server: the NVRTC worker
processes (started by a warm-up compile) and the precompiled torch/extension.h (built before the
timed checks, its build timed apart; `--pch-dir` reuses one built before). Reported per pass:
p50 / p90 / max seconds per candidate (wall clock of `check_candidate`), the p50 of each stage's
own compile time, and any candidate that did not pass. Targets: device p50 <= 0.1 s, device +
host p50 <= 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelwright.cuda import compile_workers  # noqa: E402
from kernelwright.cuda.compile_check import CompileCheckSettings, check_candidate  # noqa: E402
from kernelwright.cuda.compile_stages import toolchain  # noqa: E402
from kernelwright.cuda.host_compile import pch_info  # noqa: E402
from kernelwright.seed import load_seed_tasks  # noqa: E402

WARMUP = 'from torch.utils.cpp_extension import load_inline\nm = load_inline(name="w", cpp_sources="", ' \
         'cuda_sources="__global__ void kw_warm(float* x) { x[0] = 1.0f; }")\n'


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50_s": round(statistics.median(ordered), 4), "p90_s": round(ordered[int(0.9 * (len(ordered) - 1))], 4),
            "max_s": round(ordered[-1], 4), "mean_s": round(statistics.fmean(ordered), 4)}


def run_pass(solutions: list[tuple[str, str]], settings: CompileCheckSettings) -> dict[str, Any]:
    walls: list[float] = []
    device: list[float] = []
    host: list[float] = []
    failed: list[dict[str, str]] = []
    for task_id, source in solutions:
        start = time.perf_counter()
        result = check_candidate(source, settings)
        walls.append(time.perf_counter() - start)
        device.append(result.device.seconds)
        host.append(result.host.seconds)
        if not result.ok:
            failed.append({"id": task_id, "device": result.device.log[:400], "host": result.host.log[:400]})
        print(f"{task_id:45s} ok={result.ok} wall={walls[-1]:.3f}s device={result.device.seconds:.3f}s "
              f"host={result.host.status}:{result.host.seconds:.3f}s", flush=True)
    return {"n": len(solutions), "wall": _summary(walls), "device_stage_p50_s": round(statistics.median(device), 4),
            "host_stage_p50_s": round(statistics.median(host), 4), "failed": failed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--limit", type=int, default=0, help="first N seed solutions only (0: all)")
    parser.add_argument("--pch-dir", type=Path, help="reuse a precompiled header folder (default: a fresh one)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--host-frontend", default="auto", choices=["auto", "libclang", "gcc"],
                        help="host checker (CompileCheckSettings.host_frontend)")
    args = parser.parse_args()
    tasks = load_seed_tasks()
    solutions = [(t.id, t.solution) for t in (tasks[: args.limit] if args.limit else tasks)]
    with tempfile.TemporaryDirectory(prefix="kw_bench_cc_") as tmp:
        pch_dir = args.pch_dir or Path(tmp) / "pch"
        base = CompileCheckSettings(cache_dir=Path(tmp) / "warm", pch_dir=pch_dir, workers=args.workers,
                                    host_frontend=args.host_frontend)
        start = time.perf_counter()
        tools = toolchain(base)
        pch_s = time.perf_counter() - start
        check_candidate(WARMUP, CompileCheckSettings(cache_dir=Path(tmp) / "warm", pch_dir=pch_dir, host=False,
                                                     workers=args.workers, host_frontend=args.host_frontend))
        passes = {}
        for name, host in (("device", False), ("device_host", True)):
            settings = CompileCheckSettings(cache_dir=Path(tmp) / name, pch_dir=pch_dir, host=host,
                                            workers=args.workers, host_frontend=args.host_frontend)
            print(f"--- {name}", flush=True)
            passes[name] = run_pass(solutions, settings)
        header = tools[2] if not isinstance(tools, str) else None
        report = {
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
            "pch": {"toolchain_s": round(pch_s, 2), "dir_reused": args.pch_dir is not None, **pch_info(header)},
            "compiles": dict(compile_workers.COMPILES),
            **passes,
        }
    print(json.dumps({k: v for k, v in report.items() if k not in ("device", "device_host")}, indent=2))
    for name in ("device", "device_host"):
        print(name, json.dumps(passes[name]["wall"]), "failed:", len(passes[name]["failed"]))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
