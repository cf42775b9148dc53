"""Where the judges' and the runners' CPU went: the cProfile files of a verification run added up.

    python bench/cpu_profile_summary.py PROFILE_DIR [--top 25] [--json OUT]

PROFILE_DIR is what `VerifyConfig.cpu_profile_dir` (`bench/verify_throughput.py --cpu-profile DIR`)
filled: `judge-<pid>.prof` and `runner-<pid>.prof`, one pair per candidate. For each role it prints
and writes the functions with the most CPU of their own (tottime) and the most with what they call
(cumtime), in seconds per process (the mean over that role's files). Runner files are written by the
candidate's process: read them for honest candidates only.
"""

from __future__ import annotations

import argparse
import json
import pstats
import sys
from pathlib import Path
from typing import Any

ROLES = ("judge", "runner")


def _name(func: tuple[str, int, str]) -> str:
    path, line, name = func
    if path == "~":  # a built-in
        return name
    parts = Path(path).parts
    short = "/".join(parts[parts.index("kernelwright"):] if "kernelwright" in parts else parts[-2:])
    return f"{short}:{line}({name})"


def role_summary(files: list[Path], top: int) -> dict[str, Any]:
    """The mean seconds per process of the `top` functions by own time and by cumulative time."""
    stats, n = None, 0
    for f in files:  # each file read once, added to the role's sum
        try:
            one = pstats.Stats(str(f))
        except (OSError, ValueError, TypeError, EOFError) as exc:
            print(f"skipped {f.name}: {exc}", file=sys.stderr)
            continue
        stats = one if stats is None else stats.add(one)
        n += 1
    if stats is None:
        return {"processes": 0}
    rows = [(func, tt, ct, nc) for func, (_cc, nc, tt, ct, _callers) in stats.stats.items()]  # type: ignore[attr-defined]

    def table(key: int) -> list[dict[str, Any]]:
        ranked = sorted(rows, key=lambda r: -r[key])[:top]
        return [{"function": _name(f), "own_s": round(tt / n, 4), "cumulative_s": round(ct / n, 4),
                 "calls": round(nc / n, 1)} for f, tt, ct, nc in ranked]

    return {"processes": n, "profiled_s_per_process": round(sum(r[1] for r in rows) / n, 3),
            "by_own_time": table(1), "by_cumulative_time": table(2)}


def summarise(folder: Path, top: int = 25) -> dict[str, Any]:
    return {role: role_summary(sorted(folder.glob(f"{role}-*.prof")), top) for role in ROLES}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if not args.folder.is_dir():
        print(f"no such folder: {args.folder}", file=sys.stderr)
        return 2
    summary = summarise(args.folder, args.top)
    for role, s in summary.items():
        print(f"{role}: {s['processes']} processes, {s.get('profiled_s_per_process', 0)} s profiled each")
        for row in s.get("by_own_time", []):
            print(f"  own {row['own_s']:8.3f} s  cum {row['cumulative_s']:8.3f} s  {row['calls']:>9} calls  "
                  f"{row['function']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
