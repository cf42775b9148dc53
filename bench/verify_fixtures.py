"""Every verification fixture (cheats, faults, honest) and some honest seed solutions, on a GPU.

    python bench/verify_fixtures.py --jobs 8 --json out.json [--seeds 12 | --seeds all] [--no-split-build]
    python bench/verify_fixtures.py --jobs 16 --runs 3 --json out.json     # the same set three times

Prints one line per candidate (expected reason, verdict, detail) and the pass counts; exit 1 if
any verdict differs from its expectation. The honest candidates run after the faults in the same
evaluation, so a fault that leaked into later workers would show up as a failed honest one. With
`--runs N` the whole set runs N times, each with a fresh build cache; the summary names every
candidate whose verdict was not its expected one in every run (`unstable`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from kernelwright.seed import load_seed_tasks
from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.verdict import JUDGE_VERSION, Verdict, median_phase_cpu_s, median_phase_s
from kernelwright.verifier.verify import verify_many

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "verify"


def cases(n_seeds: int | None, cache: str, split: bool, held: bool = VerifyConfig.held_timed_outputs,
          early: bool = VerifyConfig.early_stop_clock) -> list[tuple[str, str, VerifyConfig]]:
    """(name, expected reason, config): every fixture, then `n_seeds` seed solutions one per category
    (None: all of them); `held`: the trials' outputs held and a few read back (held_timed_outputs, the
    default); False: every timed output read back under the lock, as judges before version 22; `early`: the
    clock's rounds ended once the timer reads within its bound (early_stop_clock, the default since judge
    version 23); False: every round runs."""
    expected = json.loads((FIXTURES / "expected.json").read_text())
    out = []
    for name in sorted(expected, key=lambda n: (n.startswith("honest"), n)):
        cfg = VerifyConfig(problem=str(FIXTURES / "problems" / expected[name]["problem"]),
                           candidate=str(FIXTURES / "candidates" / name), compile_baseline=False,
                           timeout_s=110.0 if name == "fault_hang.py" else 300.0, build_cache=cache,
                           timing_budget_s=0.3, split_build=split, held_timed_outputs=held, early_stop_clock=early)
        out.append((name, expected[name]["reason"], cfg))
    tasks = load_seed_tasks()
    per_cat: dict[str, list] = {}
    for t in tasks:
        per_cat.setdefault(t.category, []).append(t)
    chosen = tasks if n_seeds is None else [ts[0] for ts in per_cat.values()][:n_seeds]
    for t in chosen:
        cfg = VerifyConfig(problem=str(t.path / "reference.py"), candidate=str(t.path / "solution.py"),
                           compile_baseline=False, timeout_s=300.0, build_cache=cache, timing_budget_s=0.3,
                           split_build=split, held_timed_outputs=held, early_stop_clock=early)
        out.append((f"seed/{t.id}", "ok", cfg))
    return out


def run_once(args: argparse.Namespace, label: str) -> tuple[list[dict], list[Verdict], float]:
    """One pass over every case with a fresh build cache: (rows, verdicts, wall seconds)."""
    with tempfile.TemporaryDirectory(prefix="kw_builds_") as cache:
        todo = cases(None if args.seeds == "all" else int(args.seeds), cache, args.split_build, args.held,
                     args.early)
        start = time.perf_counter()
        names = {id(c): (name, want) for name, want, c in todo}

        def done(cfg: VerifyConfig, v: Verdict) -> None:
            name, want = names[id(cfg)]
            print(f"  {label} {time.perf_counter() - start:6.0f} s  {'ok ' if v.reason == want else 'BAD'} {name} -> "
                  f"{v.brief()}", flush=True)

        verdicts = verify_many([c for _, _, c in todo], jobs=args.jobs, on_done=done)
        wall = time.perf_counter() - start
    rows = []
    for (name, want, _), v in zip(todo, verdicts, strict=True):
        rows.append({"candidate": name, "expected": want, "reason": v.reason, "status": v.status,
                     "detail": v.detail[:400], "compile_s": v.compile_s, "speedup": v.speedup,
                     "custom_kernel_time_share": v.custom_kernel_time_share, "build": v.build,
                     "phase_s": v.phase_s})
        mark = "ok " if v.reason == want else "BAD"
        print(f"{mark} {name:<45} expected {want:<22} got {v.reason:<22} {v.detail[:150]}")
    return rows, verdicts, wall


def unstable(runs: list[list[dict]]) -> dict[str, list[str]]:
    """Candidate -> its reason in each run, for every candidate that missed its expected reason in any run."""
    out: dict[str, list[str]] = {}
    for i, row in enumerate(runs[0]):
        reasons = [run[i]["reason"] for run in runs]
        if any(r != row["expected"] for r in reasons):
            out[row["candidate"]] = reasons
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--seeds", default="12", help="honest seed solutions to add (one per category), or 'all'")
    ap.add_argument("--no-split-build", dest="split_build", action="store_false",
                    help="build every candidate as written (default: the split build where it applies)")
    ap.add_argument("--runs", type=int, default=1, help="passes over the whole set, each with a fresh build cache")
    ap.add_argument("--no-held-timed-outputs", dest="held", action="store_false",
                    help="every timed output read back under the timing lock (VerifyConfig.held_timed_outputs off, "
                         "as judges before version 22); default: held by the runner and a few read back")
    ap.add_argument("--no-early-stop-clock", dest="early", action="store_false",
                    help="every round of the judge's clock runs (VerifyConfig.early_stop_clock off, as judges "
                         "before version 23); default: the rounds end once the timer reads within its bound")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if args.runs < 1:
        ap.error(f"--runs must be 1 or more, not {args.runs}")
    runs, summaries, all_verdicts = [], [], []
    for n in range(args.runs):
        rows, verdicts, wall = run_once(args, f"run {n + 1}/{args.runs}")
        passed = sum(r["reason"] == r["expected"] for r in rows)
        builds = Counter(r["build"] or "none" for r in rows)
        print(f"run {n + 1}: {passed}/{len(rows)} verdicts as expected ({wall:.0f} s wall, {args.jobs} workers); "
              f"builds: {dict(builds)}")
        runs.append(rows)
        all_verdicts += verdicts
        summaries.append({"passed": passed, "total": len(rows), "wall_s": wall, "builds": builds})
    phases = median_phase_s(all_verdicts)
    print("median seconds per phase:", json.dumps(phases))
    missed = unstable(runs)
    for name, reasons in missed.items():
        print(f"not as expected in every run: {name}: {', '.join(reasons)}")
    if args.json:
        last = summaries[-1]
        args.json.write_text(json.dumps({"passed": last["passed"], "total": last["total"], "wall_s": last["wall_s"],
                                         "split_build": args.split_build, "builds": last["builds"],
                                         "median_phase_s": phases, "median_phase_cpu_s": median_phase_cpu_s(
                                             all_verdicts), "rows": runs[-1], "runs": summaries,
                                         "unstable": missed, "judge_version": JUDGE_VERSION}, indent=1))
    return 0 if not missed else 1


if __name__ == "__main__":
    sys.exit(main())
