"""RL's start in a work folder of scripts/kernel_model_gpu.sh, and the RL version beside it.

    PYTHONPATH=. python bench/rl_vs_start.py best W       # prints the SEED-MODE RL should start from
    PYTHONPATH=. python bench/rl_vs_start.py compare W 0-plain MODEL synth infill   # writes W/rl_vs_start.json

`best`: of the versions whose held-out compositions' evaluation finished (`evaluate-seed<SEED-MODE>-synth`
with its `.done`), the one with the highest fast_0, then compile rate; exits non-zero naming the problem when
none finished. `compare`: per suite, the start's figures (`evaluate-seed<START>-<suite>/results.json`) beside
the RL version's (`rl-evaluate-<suite>/results.json`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kernelwright.atomic import write_json

KEYS = ("samples", "compile_rate", "fast_0", "fast_1", "own.fast_0", "own.fast_1", "kb.fast_0", "cheat_rate")
PREFIX, SUFFIX = "evaluate-seed", "-synth"


def best_version(workdir: Path) -> str | None:
    """The SEED-MODE whose finished held-out-composition evaluation scored best (fast_0, then compile rate)."""
    scored = []
    for results in workdir.glob(f"{PREFIX}*{SUFFIX}/results.json"):
        if (results.parent / ".done").exists():
            m = json.loads(results.read_text())["metrics"]
            name = results.parent.name.removeprefix(PREFIX).removesuffix(SUFFIX)
            scored.append((m.get("fast_0", 0.0), m.get("compile_rate", 0.0), name))
    return max(scored)[2] if scored else None


def compare(workdir: Path, start: str, model: str, suites: list[str]) -> dict[str, Any]:
    """Per suite, {"start": figures, "rl": figures}; written to WORKDIR/rl_vs_start.json."""
    rows: dict[str, Any] = {}
    for suite in suites:
        folders = (("start", f"{PREFIX}{start}-{suite}"), ("rl", f"rl-evaluate-{suite}"))
        rows[suite] = {}
        for label, folder in folders:
            results = workdir / folder / "results.json"
            if not results.is_file():
                raise FileNotFoundError(f"{results}: no finished evaluation of the {label} version on {suite}")
            metrics = json.loads(results.read_text())["metrics"]
            rows[suite][label] = {k: metrics[k] for k in KEYS if k in metrics}
    what = "the RL version beside the SFT version it started from, on each held-out suite (synth: compositions)"
    write_json(workdir / "rl_vs_start.json", {"what": what, "start_version": start, "rl_model": model, **rows})
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("best", help="print the SEED-MODE with the best held-out compositions")
    b.add_argument("workdir", type=Path)
    c = sub.add_parser("compare", help="write WORKDIR/rl_vs_start.json")
    c.add_argument("workdir", type=Path)
    c.add_argument("start", help="the SEED-MODE RL started from")
    c.add_argument("model", help="the RL version (registry URI or folder)")
    c.add_argument("suites", nargs="+", help="suites both were evaluated on (synth, infill)")
    a = p.parse_args(argv)
    if a.command == "best":
        name = best_version(a.workdir)
        if name is None:
            sys.exit(f"{a.workdir}: no finished evaluation of the held-out compositions")
        sys.stdout.write(name + "\n")
        return
    try:
        rows = compare(a.workdir, a.start, a.model, a.suites)
    except FileNotFoundError as e:
        sys.exit(str(e))
    sys.stdout.write(json.dumps(rows) + "\n")


if __name__ == "__main__":
    main()
