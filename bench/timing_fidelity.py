"""Timing fidelity: the verifier's timer vs `triton.testing.do_bench` on the same ops (GPU only).

    python bench/timing_fidelity.py --json out.json [--shapes all|first] [--budget-s 0.3]

Every reference of kernelwright's suite, on every shape, is timed twice by the worker's timer
(CUDA events through libcudart, L2 flush, device-wide sync, median of trials) and twice by
do_bench (its own L2 flush, median). Printed and saved: the median |ours/do_bench - 1| over the
ops (target <= 5%) and the median |run1/run2 - 1| of our own two runs (target <= 3%). The
reference code is kernelwright's own suite, so it runs in this process.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from triton.testing import do_bench

from kernelwright.evaluation.candidates import suite_root
from kernelwright.verifier.isolation import import_file
from kernelwright.verifier.problems import load_problems
from kernelwright.verifier.spec import Spec
from kernelwright.verifier.timer import Timer
from kernelwright.verifier.timing import TimingSettings, fresh_sets, median_ms


def ops(shapes: str) -> list[tuple[str, Any, dict[str, Any]]]:
    out = []
    for i, p in enumerate(load_problems(suite_root())):
        mod = import_file(p.path, f"kw_fidelity_{i}")
        for shape in p.shapes if shapes == "all" else p.shapes[:1]:
            out.append((p.id, mod, shape))
    return out


def measure(mod: Any, shape: dict[str, Any], timer: Timer, spec: Spec, flush: torch.Tensor) -> tuple[float, float]:
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).cuda().eval()
    settings = TimingSettings.of(spec)
    sets = fresh_sets(mod, shape, settings, 7000)
    with torch.no_grad():
        ours = median_ms(model, sets, timer, settings, flush).median_ms
        theirs = do_bench(lambda: model(*sets[0]), warmup=25, rep=int(spec.timing_budget_s * 1000),
                          return_mode="median")
    return ours, float(theirs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", choices=("all", "first"), default="all")
    ap.add_argument("--budget-s", type=float, default=0.3, help="timed seconds per op and method")
    ap.add_argument("--json", type=Path, default=Path("docs/results/timing_fidelity.json"))
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("timing_fidelity needs a CUDA device", file=sys.stderr)
        return 3
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    spec = Spec(problem="", candidate="", result="", timing_budget_s=args.budget_s)
    timer = Timer()
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")
    todo = ops(args.shapes)
    start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for run in (1, 2):
        for pid, mod, shape in todo:
            ours, theirs = measure(mod, shape, timer, spec, flush)
            rows.append({"run": run, "problem": pid, "shape": shape, "ours_ms": ours, "do_bench_ms": theirs,
                         "ratio": ours / theirs})
            print(f"run {run} {pid:40s} {json.dumps(shape):50s} ours {ours:9.4f} ms  do_bench {theirs:9.4f} ms  "
                  f"ratio {ours / theirs:.3f}", flush=True)
    n = len(todo)
    dev = [abs(r["ratio"] - 1.0) for r in rows]
    spread = [abs(a["ours_ms"] / b["ours_ms"] - 1.0) for a, b in zip(rows[:n], rows[n:], strict=True)]
    summary = {
        "ops": n, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
        "median_abs_ratio_minus_1": statistics.median(dev),
        "p90_abs_ratio_minus_1": sorted(dev)[int(0.9 * len(dev))],
        "median_two_run_spread": statistics.median(spread),
        "timer_sync_gap_threshold_ms": timer.gap_ms,
        "wall_s": time.perf_counter() - start,
        "targets": {"median_abs_ratio_minus_1": 0.05, "median_two_run_spread": 0.03},
    }
    print(json.dumps(summary, indent=1))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1, default=str))
    ok = summary["median_abs_ratio_minus_1"] <= 0.05 and summary["median_two_run_spread"] <= 0.03
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
