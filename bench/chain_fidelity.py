"""Whether answers to held-out compositions write their problem's chain of ops: all of it, its first ops only, or
something else.

    PYTHONPATH=. python bench/chain_fidelity.py W --json W/chain_fidelity.json          # the GPU recipe's folder
    PYTHONPATH=. python bench/chain_fidelity.py .kernelwright --evaluation .kernelwright/evaluate_compositions

A synthesized solution writes each op of its chain as one statement led by the op's name
(`/* 2/3 gelu */ v = ...;`, synthesis/ops.py; without its place before generator version 6), so an answer in
that style can be read back: its *sections* are the runs of consecutive lines holding op names (a vectorised
kernel and its scalar tail each hold the chain once). Each answer is

- `match`: every section is the problem's chain;
- `stops_early`: every section is a start of the chain and one stops before its end (the failure that a
  kernel name holding the first ops invited: the model writes the ops it can see and stops);
- `repeats`: the chain, with some op written again right after itself (a stutter: the same statement twice);
- `other`: ops out of order, left out in the middle, or foreign;
- `untagged`: no op names (the one-expression style, or none written), not read.

Where the tags are numbered (`/* k/n op */`, since version 6), each answer's count chosen up front is read too:
`right` when every run of its tags opens with a count n the problem's own solution states, `wrong` when one opens
with another (`/* 1/4 neg */` on a chain of five), `unnumbered` without numbered tags, `unread` when the solution
states no count. A solution states its counts in its numbered tags, or where it writes its chain as one expression
(no tags), in its plan comment's items (`// y = 1/4 sqrt_abs, then 2/4 gelu, ...`, since version 8).

The chain is the problem's `ops` in its solution's meta.json (synthesize's `heldout_solutions`); answers are
an evaluation folder's `generations/<problem>/sample_<k>.py`, joined with its results.json's verdicts where
there is one. Prints a table per evaluation folder and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kernelwright.evaluation.report import read_reasons  # noqa: E402
from kernelwright.synthesis.ops import OPS  # noqa: E402

TAG = re.compile(r"/\*\s*(?:\d+\s*/\s*\d+\s+)?([a-z0-9_]+)\s*\*/")  # `/* gelu */`, `/* 2/3 gelu */` (since version 6)
NUMBERED = re.compile(r"/\*\s*\d+\s*/\s*(\d+)\s+[a-z0-9_]+\s*\*/")  # the count n of `/* k/n op */`
PLAN_ITEM = re.compile(r"\b(\d+)/(\d+) ([a-z0-9_]+)")  # `1/4 sqrt_abs` in a plan comment (since version 8)
CLASSES = ("match", "stops_early", "repeats", "other", "untagged")
COUNTS = ("right", "wrong", "unnumbered", "unread")


def sections(code: str) -> list[list[str]]:
    """The runs of consecutive lines naming ops (only names of synthesis's ops count), in order."""
    runs: list[list[str]] = []
    current: list[str] = []
    for line in code.splitlines():
        names = [n for n in TAG.findall(line) if n in OPS]
        if names:
            current += names
        elif current:
            runs.append(current)
            current = []
    return runs + ([current] if current else [])


def first_counts(code: str) -> list[int]:
    """The count n of the first `/* k/n op */` tag of each run of consecutive numbered lines: the length the
    writer chose for that run up front."""
    firsts: list[int] = []
    in_run = False
    for line in code.splitlines():
        m = NUMBERED.search(line)
        if m and not in_run:
            firsts.append(int(m.group(1)))
        in_run = m is not None
    return firsts


def stated_counts(solution: str) -> list[int]:
    """The counts a solution states up front: those of its numbered tags' runs, else (a chain written as one
    expression) of its plan comments' stages, the n of each item `1/n op`; [] when it states none."""
    tagged = first_counts(solution)
    if tagged:
        return tagged
    return [int(n) for line in solution.splitlines() if line.lstrip().startswith("//")
            for k, n, op in PLAN_ITEM.findall(line) if k == "1" and op in OPS]


def count_reading(answer: str, solution: str) -> str:
    """One of COUNTS: whether every run of the answer's numbered tags opens with a count the problem's own
    solution states (`right`), any opens with another (`wrong`), it numbers none (`unnumbered`), or the
    solution states no count to read it against (`unread`)."""
    chosen = first_counts(answer)
    if not chosen:
        return "unnumbered"
    stated = stated_counts(solution)
    if not stated:
        return "unread"
    return "right" if set(chosen) <= set(stated) else "wrong"


def classify(chain: Sequence[str], found: list[list[str]]) -> str:
    """One of CLASSES for an answer whose sections are `found`, against the problem's `chain`."""
    if not found:
        return "untagged"
    read = _against(list(chain), found)
    if read != "other":
        return read
    once = [[op for i, op in enumerate(s) if i == 0 or op != s[i - 1]] for s in found]
    return "repeats" if _against(list(chain), once) == "match" else "other"


def _against(chain: list[str], found: list[list[str]]) -> str:
    """match, stops_early or other: `found` read against `chain` as it is written."""
    # a stage may be written once per code path (a vectorised body and its scalar tail): repeats collapse, unless
    # the chain itself repeats an op across stages (a reduction's pre- and post-ops)
    stages = [s for i, s in enumerate(found) if i == 0 or s != found[i - 1]]
    readings = ([op for s in stages for op in s], [op for s in found for op in s])
    if all(s == chain for s in stages) or chain in readings:
        return "match"
    if all(s == chain[:len(s)] for s in stages) or any(chain[:len(r)] == r for r in readings):
        return "stops_early"
    return "other"


def solutions(solution_dirs: Sequence[Path]) -> dict[str, str]:
    """Problem id -> its solution's code (solution.py beside each meta.json)."""
    return {f.parent.name: f.read_text(errors="replace") for root in solution_dirs
            for f in sorted(root.glob("*/solution.py"))}


def chains(solution_dirs: Sequence[Path]) -> dict[str, list[str]]:
    """Problem id -> its chain of ops, from each solution folder's meta.json (problems without a chain left out)."""
    out: dict[str, list[str]] = {}
    for root in solution_dirs:
        for meta in sorted(root.glob("*/meta.json")):
            ops = json.loads(meta.read_text()).get("ops")
            if isinstance(ops, list) and ops and all(isinstance(o, str) for o in ops):
                out[meta.parent.name] = ops
    return out


def read_evaluation(evaluation: Path, chain_of: dict[str, list[str]],
                    solution_of: dict[str, str] | None = None) -> dict[str, Any]:
    """Every answer of `evaluation` to a problem with a chain: its class, sections, the counts its runs of tags
    chose up front against its problem's solution (`solution_of`: problem id -> solution code) and its verdict;
    and the tallies."""
    solution_of = solution_of or {}
    reasons = read_reasons(evaluation) or {}
    rows = []
    for answer in sorted((evaluation / "generations").glob("*/sample_*.py")):
        problem, sample = answer.parent.name, int(answer.stem.rsplit("_", 1)[1])
        if problem not in chain_of:
            continue
        code = answer.read_text(errors="replace")
        found = sections(code)
        solution = solution_of.get(problem)  # without it the count is not read (None)
        rows.append({"problem": problem, "sample": sample, "chain": chain_of[problem], "sections": found,
                     "class": classify(chain_of[problem], found), "first_counts": first_counts(code),
                     "count": count_reading(code, solution) if solution is not None else None,
                     "reason": reasons.get((problem, sample))})
    counts = Counter(r["class"] for r in rows)
    correct = Counter(r["class"] for r in rows if r["reason"] == "ok")
    up_front = Counter(r["count"] for r in rows)
    return {"evaluation": str(evaluation), "answers": len(rows), "counts": {c: counts[c] for c in CLASSES},
            "correct": {c: correct[c] for c in CLASSES}, "count_up_front": {c: up_front[c] for c in COUNTS},
            "rows": rows}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("workdir", type=Path, help="the work folder (synthesize/ beneath it)")
    p.add_argument("--evaluation", type=Path, action="append", default=[],
                   help="an evaluation folder (generations/ beneath it); repeatable. Default: every evaluate-*synth "
                        "folder and evaluate_compositions of the work folder")
    p.add_argument("--solutions", type=Path, action="append", default=[],
                   help="a folder of <problem>/meta.json; repeatable. Default: the work folder's "
                        "synthesize/heldout*_solutions")
    p.add_argument("--json", type=Path, default=None, help="where to write the results (default: print only)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    solution_dirs = a.solutions or sorted(a.workdir.glob("synthesize/heldout*_solutions"))
    evaluations = a.evaluation or sorted([*a.workdir.glob("evaluate-*synth*"),
                                          *a.workdir.glob("evaluate_compositions")])
    chain_of = chains(solution_dirs)
    if not chain_of:
        print(f"no held-out solution with a chain of ops under {', '.join(map(str, solution_dirs)) or a.workdir}",
              file=sys.stderr)
        return 2
    solution_of = solutions(solution_dirs)
    results = [read_evaluation(e, chain_of, solution_of) for e in evaluations if (e / "generations").is_dir()]
    if not results:
        print(f"no evaluation folder with generations/ under {a.workdir}", file=sys.stderr)
        return 2
    print(f"{'evaluation':<40} {'answers':>7} " + " ".join(f"{c:>12}" for c in CLASSES))
    for r in results:
        cells = " ".join(f"{r['counts'][c]:>6} ({r['correct'][c]:>2} ok)" for c in CLASSES)
        print(f"{Path(r['evaluation']).name:<40} {r['answers']:>7} {cells}")
        print(f"{'':<40} count chosen up front: " + ", ".join(f"{c} {r['count_up_front'][c]}" for c in COUNTS))
    if a.json is not None:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps({"what": "answers to held-out compositions against their problem's chain of ops",
                                      "command": " ".join(["python", "bench/chain_fidelity.py", *sys.argv[1:]]),
                                      "evaluations": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
