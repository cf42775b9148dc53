"""Verified candidates per hour: kernelwright's verifier vs KernelBench's best mode (GPU only).

    python bench/verify_throughput.py --candidates 32 --json out.json [--phases kernelwright,kernelbench_best_mode]
    python bench/verify_throughput.py --json out.json --keep --phases kernelwright_serial   # a later command
    python bench/verify_throughput.py --phases kernelwright --repeat 3 --warm-header --json out.json
    python bench/verify_throughput.py --phases kernelbench_best_mode --keep --json out.json  # then the ratio

Candidates: the honest seed solutions of N distinct tasks (each against its own reference).
- kernelwright: `verify_many` with one worker per core and a cold build cache; the full protocol
  (every distribution and seed, cheat checks, profiler share, timing of candidate and reference).
  torch's precompiled extension.h outlives runs; `--cold-header` deletes it first so that building
  it counts (the JSON records `precompiled_header_at_start`).
- KernelBench best mode, re-implemented here from its description: every candidate built once by
  stock `load_inline` (full torch/extension.h, no precompiled header) in a pool of as many
  processes as cores, then evaluated one after another, each in a fresh process: 5 correctness
  trials (allclose 1e-2) and 100 timed trials with torch.cuda.Event; the reference is not timed.
- serial: kernelwright with one worker, on the first `--serial` candidates (cold cache).
- late_profiler: kernelwright with `profiler_warm_up` off (the profiler starts at the first
  shape's kernel-share pass, not during the build): not in the default phases; an A/B.
- spin: kernelwright with `blocking_gpu_wait` off (judges and runners spin through every wait for
  the GPU, CUDA's choice on a host of many cores): not in the default phases; an A/B.
- gate: kernelwright with `gpu_gate` on (no other candidate's correctness step on the GPU while one is
  timed: verifier/gpu_gate.py): not in the default phases; an A/B.
- profiled: kernelwright with a cProfile of every judge and runner (`cpu_profile_dir`), added up per
  role (bench/cpu_profile_summary.py) under `cpu_profile`: where their CPU goes; the profilers cost CPU
  too, so its throughput is not the plain phase's. Not in the default phases.
- host_inputs: kernelwright with `gpu_inputs` off (every draw made on the host and copied, as judges
  before version 21 drew): not in the default phases; an A/B.
- unheld: kernelwright with `held_timed_outputs` off (the runner writes every timed output and the
  judge reads them all back under the timing lock, as judges before version 22 did; on, the default,
  it holds them with their sums and the judge reads back the 8 it chooses): not in the default
  phases; an A/B.
- full_clock: kernelwright with `early_stop_clock` off (every round of the judge's clock runs, as
  judges before version 23; on, the default, the rounds end once the timer reads within its bound:
  verifier/timing.settled): not in the default phases; an A/B.
- wide: kernelwright with twice as many workers as `--jobs` (builds of one wave overlap the GPU
  phases of another): not in the default phases; KernelBench keeps one process per core.
`--warm-header` builds torch's precompiled extension.h before each kernelwright phase if it is
missing (a once-per-torch-install cost, like the header a first run leaves; stock `load_inline`,
as KernelBench calls it, deletes it), so every phase starts alike.
Printed and saved: seconds per candidate and candidates per hour of each, and the ratio
kernelwright / KernelBench measured in this run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cpu_profile_summary import summarise
from utilisation import Utilisation

from kernelwright.seed import SeedTask, load_seed_tasks
from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.verdict import median_per_key, median_phase_cpu_s, median_phase_s
from kernelwright.verifier.verify import verify_many

KB_BUILD = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("cand", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
"""

KB_EVAL = """
import importlib.util, sys, torch
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod
ref, cand = load(sys.argv[1], "ref"), load(sys.argv[2], "cand")
init = ref.get_init_inputs()
torch.manual_seed(0); model = ref.Model(*init).cuda()
torch.manual_seed(0); new = cand.ModelNew(*init).cuda()
ok = True
with torch.no_grad():
    for trial in range(5):
        torch.manual_seed(trial)
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
        a, b = model(*inputs), new(*inputs)
        torch.cuda.synchronize()
        ok = ok and a.shape == b.shape and torch.allclose(a.float(), b.float(), atol=1e-2, rtol=1e-2)
    times = []
    for _ in range(3):
        new(*inputs)
    torch.cuda.synchronize()
    for _ in range(100):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); new(*inputs); e.record(); torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
print("KB_RESULT", int(ok), sum(times) / len(times))
"""


def pick(n: int) -> list[SeedTask]:
    """N tasks, round-robin over categories, so the builds vary."""
    by_cat: dict[str, list[SeedTask]] = {}
    for t in load_seed_tasks():
        by_cat.setdefault(t.category, []).append(t)
    order = [ts[i] for i in range(max(len(v) for v in by_cat.values())) for ts in by_cat.values() if i < len(ts)]
    if n > len(order):
        raise SystemExit(f"only {len(order)} seed tasks")
    return order[:n]


def header_files() -> list[Path]:
    """torch's precompiled extension.h and its signature (pch.py), which outlive a run."""
    import torch

    inc = Path(torch.__file__).parent / "include" / "torch"
    return [inc / "extension.h.gch", inc / "extension.h.sign"]


def _warm_header() -> float:
    from kernelwright.cuda.pch import build_header
    from kernelwright.cuda.slim_header import build_in_subprocess, failures

    start = time.perf_counter()
    if not build_header(timeout_s=600.0):
        raise SystemExit("could not build torch's precompiled extension.h")
    if not build_in_subprocess(timeout_s=600.0):  # found up to date after its first build
        print("a smaller host header or the generic bindings did not build: split builds read the next header; "
              f"g++ said: {json.dumps(failures())}", flush=True)
    return time.perf_counter() - start


def run_kernelwright(tasks: list[SeedTask], jobs: int, timing_budget_s: float, split_build: bool,
                     cold_header: bool = False, profiler_warm_up: bool = True, slim_header: bool = True,
                     generic_bindings: bool = True, blocking_gpu_wait: bool = True, gpu_gate: bool = False,
                     cpu_profile_dir: str | None = None, gpu_inputs: bool = True,
                     held: bool = VerifyConfig.held_timed_outputs, early: bool = VerifyConfig.early_stop_clock) -> dict:
    if cold_header:
        for f in header_files():
            f.unlink(missing_ok=True)
    header_at_start = header_files()[0].is_file()
    with tempfile.TemporaryDirectory(prefix="kw_tp_") as cache:
        cfgs = [VerifyConfig(problem=str(t.path / "reference.py"), candidate=str(t.path / "solution.py"),
                             build_cache=cache, compile_baseline=False, timeout_s=600.0,
                             timing_budget_s=timing_budget_s, split_build=split_build,
                             profiler_warm_up=profiler_warm_up, slim_header=slim_header,
                             generic_bindings=generic_bindings, blocking_gpu_wait=blocking_gpu_wait,
                             gpu_gate=gpu_gate, cpu_profile_dir=cpu_profile_dir,
                             gpu_inputs=gpu_inputs, held_timed_outputs=held,
                             early_stop_clock=early)
                for t in tasks]
        start = time.perf_counter()
        with Utilisation() as use:
            verdicts = verify_many(cfgs, jobs=jobs, on_done=lambda c, v: print(
                f"  {time.perf_counter() - start:6.0f} s  {Path(c.candidate).parent.name}: {v.brief()}", flush=True))
        wall = time.perf_counter() - start
    correct = sum(v.correct for v in verdicts)
    bad = {t.id: f"{v.reason}: {v.detail[:200]}" for t, v in zip(tasks, verdicts, strict=True) if not v.correct}
    builds = sorted(v.compile_s for v in verdicts if v.compile_s is not None)
    phases = sorted({k for v in verdicts for k in v.phase_s})
    return {"wall_s": wall, "candidates": len(tasks), "correct": correct, "not_correct": bad,
            "precompiled_header_at_start": header_at_start,
            "median_build_s": builds[len(builds) // 2] if builds else None,
            "builds": dict(Counter(v.build or "none" for v in verdicts)),
            "median_phase_s": median_phase_s(verdicts), "median_phase_cpu_s": median_phase_cpu_s(verdicts),
            "sum_phase_s": {k: sum(v.phase_s.get(k, 0.0) for v in verdicts) for k in phases},
            "median_cpu_s": median_per_key([v.cpu_s for v in verdicts]), "utilisation": use.result()}


def _kb_build(task: SeedTask, root: Path) -> float:
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(root / task.id))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", KB_BUILD, str(task.path / "solution.py")], env=env, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _kb_eval(task: SeedTask, root: Path) -> tuple[bool, float | None]:
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(root / task.id))
    proc = subprocess.run([sys.executable, "-c", KB_EVAL, str(task.path / "reference.py"),
                           str(task.path / "solution.py")], env=env, capture_output=True, text=True, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("KB_RESULT"):
            _, ok, ms = line.split()
            return ok == "1", float(ms)
    return False, None


def run_kernelbench(tasks: list[SeedTask], jobs: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="kb_tp_") as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        with Utilisation() as use:
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                builds = list(pool.map(lambda t: _kb_build(t, root), tasks))
            built = time.perf_counter()
            evals = [_kb_eval(t, root) for t in tasks]
        wall = time.perf_counter() - start
    return {"wall_s": wall, "build_phase_s": built - start, "eval_phase_s": wall - (built - start),
            "candidates": len(tasks), "correct": sum(ok for ok, _ in evals),
            "median_build_s": sorted(builds)[len(builds) // 2], "utilisation": use.result()}


def per_hour(res: dict) -> float:
    return 3600.0 * res["candidates"] / res["wall_s"]


PHASES = ("kernelwright", "kernelbench_best_mode", "kernelwright_serial", "kernelwright_late_profiler",
          "kernelwright_wide", "kernelwright_extension_h", "kernelwright_slim", "kernelwright_spin",
          "kernelwright_gate", "kernelwright_profiled", "kernelwright_host_inputs", "kernelwright_unheld",
          "kernelwright_full_clock")


def _phase(name: str, tasks: list[SeedTask], args: argparse.Namespace) -> dict:
    if name == "kernelwright":
        return run_kernelwright(tasks, args.jobs, args.timing_budget_s, args.split_build, args.cold_header)
    if name == "kernelwright_late_profiler":  # A/B of the profiler warm-up, same candidates and workers
        return run_kernelwright(tasks, args.jobs, args.timing_budget_s, args.split_build, profiler_warm_up=False)
    if name == "kernelwright_extension_h":  # A/B of the slim host header (cuda/slim_header.py)
        return run_kernelwright(tasks, args.jobs, args.timing_budget_s, args.split_build, slim_header=False)
    if name == "kernelwright_slim":  # A/B of the generic bindings (cuda/host_bindings.py): the slim header
        return run_kernelwright(tasks, args.jobs, args.timing_budget_s, args.split_build, generic_bindings=False)
    if name == "kernelwright_spin":  # A/B of the blocking GPU wait (verifier/gpu_wait.py): CUDA's spinning one
        return run_kernelwright(tasks, args.jobs, args.timing_budget_s, args.split_build, blocking_gpu_wait=False)
    if name == "kernelwright_gate":  # A/B of the GPU gate (verifier/gpu_gate.py)
        return run_kernelwright(tasks, args.jobs, args.timing_budget_s, args.split_build, gpu_gate=True)
    if name == "kernelwright_host_inputs":  # A/B of inputs made on the GPU (verifier/inputs.py draw_on_gpu)
        return run_kernelwright(tasks, args.jobs, args.timing_budget_s, args.split_build, gpu_inputs=False)
    if name == "kernelwright_full_clock":  # A/B of every round of the clock (early_stop_clock off)
        return run_kernelwright(tasks, args.jobs, args.timing_budget_s, args.split_build, early=False)
    if name == "kernelwright_unheld":  # A/B of every timed output read back under the lock (held_outputs.py)
        return run_kernelwright(tasks, args.jobs, args.timing_budget_s, args.split_build, held=False)
    if name == "kernelwright_profiled":  # where the judges' and runners' CPU goes (cProfile)
        with tempfile.TemporaryDirectory(prefix="kw_prof_") as folder:
            run = run_kernelwright(tasks, args.jobs, args.timing_budget_s, args.split_build, cpu_profile_dir=folder)
            return run | {"cpu_profile": summarise(Path(folder), top=30)}
    if name == "kernelwright_wide":
        return run_kernelwright(tasks, 2 * args.jobs, args.timing_budget_s, args.split_build) | {"jobs": 2 * args.jobs}
    if name == "kernelwright_serial":
        return run_kernelwright(tasks[:args.serial], 1, args.timing_budget_s, args.split_build)
    return run_kernelbench(tasks, args.jobs)


def _repeated(name: str, tasks: list[SeedTask], args: argparse.Namespace) -> dict:
    """The phase `--repeat` times (kernelwright's phases; KernelBench's runs once): the run of median
    throughput, with every run's figure, their median and range beside it."""
    runs = []
    for _ in range(args.repeat if name.startswith("kernelwright") else 1):
        run = _phase(name, tasks, args) | {"finished_at": time.time()}
        run["s_per_candidate"] = run["wall_s"] / run["candidates"]
        run["per_hour"] = per_hour(run)
        runs.append(run)
        print(f"{name} run {len(runs)}: {run['per_hour']:.0f} verified/hour", flush=True)
    ranked = sorted(runs, key=lambda r: r["per_hour"])
    figures = [r["per_hour"] for r in ranked]
    return ranked[(len(runs) - 1) // 2] | {"runs_per_hour": [r["per_hour"] for r in runs],
                                           "per_hour_median": statistics.median(figures),
                                           "per_hour_range": [figures[0], figures[-1]]}


def _load(path: Path, tasks: list[SeedTask], args: argparse.Namespace) -> dict:
    """Earlier phases of the same comparison (same candidates, workers and settings), if any."""
    fresh = {"jobs": args.jobs, "timing_budget_s": args.timing_budget_s, "split_build": args.split_build,
             "candidates": [t.id for t in tasks]}
    if args.keep and path.is_file():
        old = json.loads(path.read_text())
        if all(old.get(k) == v for k, v in fresh.items()):
            return old
    return fresh


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidates", type=int, default=32)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--serial", type=int, default=4, help="candidates for the one-worker figure")
    ap.add_argument("--phases", default=",".join(PHASES[:3]), help=f"comma-separated subset of {', '.join(PHASES)}")
    ap.add_argument("--keep", action="store_true",
                    help="keep phases already in --json from an earlier command with the same settings "
                         "(one command has a 10-minute limit on the device box)")
    ap.add_argument("--timing-budget-s", type=float, default=1.0, help="kernelwright's timed seconds per model/shape")
    ap.add_argument("--no-split-build", dest="split_build", action="store_false",
                    help="kernelwright builds every candidate as written (default: split build where it applies)")
    ap.add_argument("--cold-header", action="store_true",
                    help="delete torch's precompiled extension.h first, so that kernelwright's figure includes "
                         "building it (default: use it if an earlier run left it)")
    ap.add_argument("--warm-header", action="store_true",
                    help="build torch's precompiled extension.h before each kernelwright phase if it is missing "
                         "(not counted; recorded as warm_header_built_s)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs of each kernelwright phase (the JSON keeps each run's figure, their median and range; "
                         "the ratio to KernelBench uses the median)")
    ap.add_argument("--json", type=Path, default=Path("docs/results/verify_throughput.json"))
    args = ap.parse_args()
    tasks = pick(args.candidates)
    out = _load(args.json, tasks, args)
    for name in args.phases.split(","):
        if name not in PHASES:
            raise SystemExit(f"unknown phase {name!r}; choose from {', '.join(PHASES)}")
        warmed = {}
        if args.warm_header and name.startswith("kernelwright") and not header_files()[0].is_file():
            warmed = {"warm_header_built_s": _warm_header()}  # stock load_inline (KernelBench's) deletes it
        out[name] = _repeated(name, tasks, args) | warmed
        if "kernelbench_best_mode" in out and "kernelwright" in out:
            kw = out["kernelwright"].get("per_hour_median", out["kernelwright"]["per_hour"])
            out["ratio_vs_kernelbench"] = kw / out["kernelbench_best_mode"]["per_hour"]
        print(name, json.dumps(out[name]), flush=True)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))  # after every phase: a time-out keeps what was measured
    print(json.dumps({k: v for k, v in out.items() if k != "candidates"}, indent=1))
    return 0

if __name__ == "__main__":
    sys.exit(main())
