"""Calibrate the timer's bound: the judge's clock over the timer, on every honest candidate (GPU only).

    python bench/timer_bound_calibration.py --json docs/results/timer_bound_calibration.json
    python bench/timer_bound_calibration.py --groups fixtures,launch_bound --modes alone --repeat 1 --json out.json
    python bench/timer_bound_calibration.py --groups seeds --modes alone --repeat 1 --offset 24 --limit 24 \
        --keep --json out.json   # seed solutions 24-47 alone, added to out.json

A candidate's timer may read below the judge's own per-call estimate (`wall_runtime_ms`) by at most
TIMER_BOUND x the timer + TIMER_BOUND_FLOOR_MS (verifier/timing.py) before it is timed again and
then `timing_inconsistent`. This bench verifies honest candidates with that check off
(`timer_bound=False`: both figures are reported as read) and collects, per shape, the timer's
median and the judge's estimate:

- `seeds`: the honest seed solutions, each against its task's reference;
- `suite`: every reference of kernelwright's suite as its own candidate (`ModelNew = Model`; the
  static checks and the kernel share, which such a candidate fails by design, are left out);
- `fixtures`: the honest fixtures of tests/fixtures/verify (`honest_*`);
- `launch_bound`: the 10 us kernel (`honest_spin_10us.py`) and the small affine kernel, alone in
  a run of their own and beside 15 copies of themselves.

Each group runs in each mode (`parallel`: `--jobs` workers, 16 by default; `alone`: one) `--repeat`
times. Printed and saved: every row, the ratio estimate / timer per group and mode (quantiles and
the largest), the factor and floor the rows need with `--margin`, whether the constants in
timing.py hold every row with that margin, and the kernel share's spread between repeats (its
noise). Copy the JSON to tests/fixtures/verify/timer_bound_calibration.json: the CPU tests hold the
constants to it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kernelwright.evaluation.candidates import suite_root
from kernelwright.seed import load_seed_tasks
from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.kernel_clock import KERNEL_CLOCK_FLOOR_MS, KERNEL_CLOCK_REJECT, KERNEL_CLOCK_SUPPORT
from kernelwright.verifier.problems import load_problems
from kernelwright.verifier.timing import TIMER_BOUND, TIMER_BOUND_FLOOR_MS
from kernelwright.verifier.verdict import JUDGE_VERSION, Verdict
from kernelwright.verifier.verify import cuda_available, run_workers

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "verify"
GROUPS = ("seeds", "suite", "fixtures", "launch_bound")
MARGIN = 1.25  # the bound must hold every honest row with this much to spare
LONG_MS = 0.05  # rows at least this long on the timer set the factor; shorter ones, the floor as well
LAUNCH_BOUND = ("honest_spin_10us.py", "honest_affine.py")


@dataclass
class Case:
    group: str
    name: str
    cfg: VerifyConfig


def _cfg(problem: Path, candidate: Path, cache: str, budget_s: float) -> VerifyConfig:
    """verify's settings but the timer's bound, which is off (both figures reported as read), and the
    kernel share, not required (a reference as its own candidate has none); `--gpu-gate` sets
    `gpu_gate` afterwards."""
    return VerifyConfig(problem=str(problem), candidate=str(candidate), compile_baseline=False, build_cache=cache,
                        timing_budget_s=budget_s, timer_bound=False, min_custom_share=0.0)


def _fixture(name: str, cache: str, budget_s: float) -> VerifyConfig:
    expected = json.loads((FIXTURES / "expected.json").read_text())
    return _cfg(FIXTURES / "problems" / expected[name]["problem"], FIXTURES / "candidates" / name, cache, budget_s)


def cases(groups: list[str], jobs: int, scratch: Path, cache: str, budget_s: float) -> dict[str, list[Case]]:
    """The candidates of each group, configured with the timer's bound off."""
    out: dict[str, list[Case]] = {}
    if "seeds" in groups:
        out["seeds"] = [Case("seeds", f"seed/{t.id}", _cfg(t.path / "reference.py", t.path / "solution.py", cache,
                                                           budget_s)) for t in load_seed_tasks()]
    if "suite" in groups:
        out["suite"] = []
        for p in load_problems(suite_root()):
            own = scratch / "suite" / f"{p.id}.py"
            own.parent.mkdir(parents=True, exist_ok=True)
            own.write_text(p.path.read_text(encoding="utf-8") + "\n\nModelNew = Model  # the reference as its own "
                                                                 "candidate (calibration)\n", encoding="utf-8")
            out["suite"].append(Case("suite", f"suite/{p.id}", _cfg(p.path, own, cache, budget_s)))
    if "fixtures" in groups:
        names = sorted(n for n in json.loads((FIXTURES / "expected.json").read_text()) if n.startswith("honest_"))
        out["fixtures"] = [Case("fixtures", n, _fixture(n, cache, budget_s)) for n in names]
    if "launch_bound" in groups:
        out["launch_bound"] = [Case("launch_bound", f"{n}#{k}", _fixture(n, cache, budget_s))
                               for n in LAUNCH_BOUND for k in range(max(1, jobs // len(LAUNCH_BOUND)))]
    return out


def rows_of(case: Case, verdict: Verdict, mode: str, run: int) -> list[dict[str, Any]]:
    """One row per timed shape of a verdict (none for a verdict that never reached timing)."""
    base = {"group": case.group, "candidate": case.name, "mode": mode, "run": run, "reason": verdict.reason}
    return [{**base, "shape": s.shape, "timer_ms": s.runtime_ms, "wall_ms": s.wall_runtime_ms,
             "share": s.custom_kernel_time_share, "share_spread": s.custom_kernel_time_share_spread,
             "disturbed": s.timing_disturbed, "kernel_ms": s.kernel_runtime_ms}
            for s in verdict.per_shape if s.runtime_ms is not None and s.wall_runtime_ms is not None]


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def derive(rows: list[dict[str, Any]], margin: float = MARGIN, bound: float = TIMER_BOUND,
           floor_ms: float = TIMER_BOUND_FLOOR_MS) -> dict[str, Any]:
    """What honest rows need of the bound (estimate <= factor x timer + floor): the factor from the
    rows of at least LONG_MS on the timer, the floor from what is left over on every row, each with
    `margin`; and whether `bound` and `floor_ms` hold every row with that margin."""
    usable = [r for r in rows if r["timer_ms"] and r["timer_ms"] > 0 and r["wall_ms"] is not None]
    if not usable:
        return {"rows": 0}
    ratios = [r["wall_ms"] / r["timer_ms"] for r in usable]
    long = [r["wall_ms"] / r["timer_ms"] for r in usable if r["timer_ms"] >= LONG_MS]
    factor = margin * max(long + [1.0])
    floor = margin * max(0.0, max(r["wall_ms"] - factor * r["timer_ms"] for r in usable))
    slack = [(bound * r["timer_ms"] + floor_ms) / r["wall_ms"] for r in usable if r["wall_ms"] > 0]
    worst = sorted(usable, key=lambda r: r["wall_ms"] - bound * r["timer_ms"], reverse=True)[:10]
    above = [r for r in usable if r["wall_ms"] > bound * r["timer_ms"] + floor_ms]
    return {"rows": len(usable), "ratio_max": max(ratios), "ratio_p50": statistics.median(ratios),
            "ratio_p90": _quantile(ratios, 0.9), "ratio_p99": _quantile(ratios, 0.99),
            "rows_above_bound": len(above), "candidates_above_bound": len({r["candidate"] for r in above}),
            "needed_factor": factor, "needed_floor_ms": floor, "margin": margin, "bound": bound,
            "floor_ms": floor_ms, "least_headroom": min(slack) if slack else None,
            "holds_with_margin": all(margin * r["wall_ms"] <= bound * r["timer_ms"] + floor_ms for r in usable),
            "worst": worst}


def derive_kernel_clock(rows: list[dict[str, Any]], margin: float = MARGIN) -> dict[str, Any]:
    """What honest rows need of the profiler's clock (verifier/kernel_clock.py): the ratio profiled
    kernel time / timer, whether the rejection bound (kernel <= REJECT x timer + floor) holds every
    row with `margin`, and how many rows the speedup cap (timer >= kernel / SUPPORT) would lower."""
    usable = [r for r in rows if r.get("kernel_ms") is not None and r["timer_ms"] and r["timer_ms"] > 0]
    if not usable:
        return {"rows": 0}
    ratios = [r["kernel_ms"] / r["timer_ms"] for r in usable]
    capped = [r for r in usable if r["timer_ms"] < r["kernel_ms"] / KERNEL_CLOCK_SUPPORT]
    worst = sorted(usable, key=lambda r: r["kernel_ms"] / r["timer_ms"], reverse=True)[:10]
    return {"rows": len(usable), "ratio_max": max(ratios), "ratio_p50": statistics.median(ratios),
            "ratio_p99": _quantile(ratios, 0.99), "reject": KERNEL_CLOCK_REJECT, "floor_ms": KERNEL_CLOCK_FLOOR_MS,
            "support": KERNEL_CLOCK_SUPPORT, "margin": margin,
            "holds_with_margin": all(margin * r["kernel_ms"] <= KERNEL_CLOCK_REJECT * r["timer_ms"]
                                     + KERNEL_CLOCK_FLOOR_MS for r in usable),
            "speedup_capped_rows": len(capped), "worst": worst}


def share_noise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The kernel share's spread over repeats of the same candidate, shape and mode."""
    seen: dict[str, list[float]] = {}
    for r in rows:
        if r["share"] is not None and r["group"] != "suite":  # a reference as candidate has no kernels of its own
            seen.setdefault(json.dumps([r["candidate"], r["shape"], r["mode"]]), []).append(r["share"])
    spreads = [max(v) - min(v) for v in seen.values() if len(v) > 1]
    if not spreads:
        return {"pairs": 0}
    return {"pairs": len(spreads), "spread_p50": statistics.median(spreads), "spread_p90": _quantile(spreads, 0.9),
            "spread_max": max(spreads)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", default=",".join(GROUPS))
    ap.add_argument("--modes", default="parallel,alone")
    ap.add_argument("--jobs", type=int, default=16, help="workers in the parallel mode")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--offset", type=int, default=0, help="skip this many candidates of each group first")
    ap.add_argument("--limit", type=int, default=0, help="at most this many candidates per group (0: all)")
    ap.add_argument("--budget-s", type=float, default=1.0, help="timed seconds per model and shape (verify's default)")
    ap.add_argument("--margin", type=float, default=MARGIN)
    ap.add_argument("--json", type=Path, default=Path("docs/results/timer_bound_calibration.json"))
    ap.add_argument("--keep", action="store_true", help="add to the rows already in --json (runs in pieces)")
    ap.add_argument("--gpu-gate", action="store_true",
                    help="verify with `gpu_gate` on (no other candidate's correctness step on the GPU while one is "
                         "timed: verifier/gpu_gate.py); the JSON records it, and --keep refuses to mix the two")
    args = ap.parse_args()
    if not cuda_available():
        print("timer_bound_calibration needs a CUDA device", file=sys.stderr)
        return 3
    groups, modes = args.groups.split(","), args.modes.split(",")
    earlier = json.loads(args.json.read_text()) if args.keep and args.json.is_file() else {}
    if earlier and bool(earlier.get("gpu_gate", False)) != args.gpu_gate:
        print(f"{args.json} holds rows taken with gpu_gate {bool(earlier.get('gpu_gate', False))}; "
              f"this run has it {args.gpu_gate}: use another --json", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = list(earlier.get("rows", []))
    other: list[dict[str, Any]] = list(earlier.get("untimed", []))
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kw_calibration_") as tmp:
        by_group = cases(groups, args.jobs, Path(tmp), str(Path(tmp) / "builds"), args.budget_s)
        for run in range(args.repeat):
            for mode in modes:
                for group, todo in by_group.items():
                    todo = todo[args.offset:args.offset + args.limit] if args.limit else todo[args.offset:]
                    verdicts = run_workers([replace(c.cfg, gpu_gate=args.gpu_gate) for c in todo],
                                           args.jobs if mode == "parallel" else 1)
                    for case, verdict in zip(todo, verdicts, strict=True):
                        got = rows_of(case, verdict, mode, run)
                        rows += got
                        if not got:
                            other.append({"candidate": case.name, "mode": mode, "run": run, "reason": verdict.reason,
                                          "detail": verdict.detail[:300]})
                    print(f"{time.perf_counter() - start:7.0f} s  run {run} {mode:8s} {group:12s} "
                          f"{len(todo)} candidates", flush=True)
    summary = {f"{g}/{m}": derive([r for r in rows if r["group"] == g and r["mode"] == m], args.margin)
               for g in GROUPS for m in ("parallel", "alone")}
    summary["all"] = derive(rows, args.margin)
    for key, s in summary.items():
        if s["rows"]:
            print(f"{key:24s} rows {s['rows']:4d}  estimate/timer p50 {s['ratio_p50']:.2f} p99 {s['ratio_p99']:.2f} "
                  f"max {s['ratio_max']:.2f}  needs {s['needed_factor']:.2f}x + {s['needed_floor_ms']:.4f} ms  "
                  f"above the bound: {s['rows_above_bound']} row(s) of {s['candidates_above_bound']} candidate(s)")
    held = "hold" if summary["all"].get("holds_with_margin") else "do NOT hold"
    print(f"TIMER_BOUND {TIMER_BOUND}x + {TIMER_BOUND_FLOOR_MS} ms {held} every honest row with margin "
          f"{args.margin}; {len(other)} verdict(s) without timing")
    clock = derive_kernel_clock(rows, args.margin)
    if clock["rows"]:
        print(f"profiler clock: kernel/timer p50 {clock['ratio_p50']:.2f} p99 {clock['ratio_p99']:.2f} max "
              f"{clock['ratio_max']:.2f}; reject bound {'holds' if clock['holds_with_margin'] else 'does NOT hold'}"
              f" with margin {args.margin}; {clock['speedup_capped_rows']} honest row(s) capped")
    noise = share_noise(rows)
    print("kernel share spread between repeats:", json.dumps(noise))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"judge_version": JUDGE_VERSION, "gpu_gate": args.gpu_gate, "jobs": args.jobs,
                                     "repeat": args.repeat,
                                     "budget_s": args.budget_s, "wall_s": time.perf_counter() - start,
                                     "summary": summary, "kernel_clock": clock, "share_noise": noise,
                                     "untimed": other, "rows": rows},
                                    indent=1, default=str))
    clock_holds = clock.get("holds_with_margin", True) and not clock.get("speedup_capped_rows")
    return 0 if summary["all"].get("holds_with_margin") and clock_holds else 1


if __name__ == "__main__":
    sys.exit(main())
