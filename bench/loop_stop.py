"""What generation's loop stop (`kernelwright.generation.LoopStop`) ends: honest answers never, loops early.

    PYTHONPATH=. .venv/bin/python bench/loop_stop.py --honest W/synthesize/heldout_solutions \
        --honest W/synthesize/train --completions W/evaluate-seed0-plain-synth/generations/completions.json \
        [--tokenizer W/base] [--budget 2048] --json out.json

Honest answers: every `*.py` under each `--honest` folder that defines `ModelNew` (solutions; the
seed corpus's solutions are always in). Each is tokenised and scanned the way generation sees it,
token by token: a false stop is an answer in which some run of `window` tokens repeats one unit of at
most `max_period` tokens (generation would have cut it there); and per category, the answers longer
than `--budget` tokens (which no completion under that budget can write whole). Completions: `completions.json` files
that `kernelwright evaluate --generate-only` writes (problem -> list of completions); for each, whether
and where the stop fires, and the tokens generated with the stop against without it (each row to its
end or the budget) as a ratio, plus the batch's length (its longest row: what one `generate` call of
all of them costs) with and without; where the evaluation's `results.json` sits beside the generations
folder, the judge's reasons for the completions the stop would have cut (a stop that changes a verdict
would show there as anything but `syntax_error`).

The tokenizer: `--tokenizer` (a base or trained model folder), else a byte-level BPE of the `small`
base's vocabulary trained here on torch's headers and `torch.nn` (a stand-in: the real one is trained
on the pretraining corpus).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from kernelwright.base_model.config import SIZES
from kernelwright.evaluation.report import read_reasons
from kernelwright.generation import LOOP_MAX_PERIOD, LOOP_WINDOW, periodic
from kernelwright.seed import load_seed_tasks

STAND_IN_CHARS = SIZES["small"].tokenizer_chars  # as much text as the small base's tokenizer learns from


def first_stop(ids: list[int], window: int, max_period: int) -> int | None:
    """The number of tokens generated when the stop first fires on `ids` (None: it never does)."""
    if len(ids) < window:
        return None
    windows = torch.tensor(ids).unfold(0, window, 1)  # every run of `window` tokens, in order
    hits = periodic(windows, max_period).nonzero()
    return int(hits[0, 0]) + window if len(hits) else None


def stand_in_tokenizer() -> Any:
    from kernelwright.base_model.tokenizer import train_tokenizer

    root = Path(torch.__file__).parent
    files = sorted(p for p in (root / "include").rglob("*") if p.suffix in {".h", ".cuh"})
    files += sorted((root / "nn").rglob("*.py"))
    random.Random(0).shuffle(files)
    texts, total = [], 0
    for f in files:
        if total >= STAND_IN_CHARS:
            break
        texts.append(f.read_text(errors="ignore"))
        total += len(texts[-1])
    return train_tokenizer(texts, SIZES["small"].vocab_size, split_newlines=True)


def honest_answers(folders: list[Path]) -> list[tuple[str, str]]:
    found = {str(t.path / "solution.py"): (t.path / "solution.py").read_text() for t in load_seed_tasks()}
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            text = path.read_text(errors="ignore")
            if "class ModelNew" in text:
                found[str(path)] = text
    return sorted(found.items())


def category_of(path: str) -> str:
    """A synthesized answer's category (its folder `<category>_<number>`), else `seed`."""
    folder = Path(path).parent.name
    head, _, tail = folder.rpartition("_")
    return head if head and tail.isdigit() else "seed"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--honest", action="append", type=Path, default=[], help="folder of honest answers")
    ap.add_argument("--completions", action="append", type=Path, default=[], help="a completions.json")
    ap.add_argument("--tokenizer", help="a model folder whose tokenizer to use (default: a stand-in)")
    ap.add_argument("--budget", type=int, default=2048, help="tokens each completion was given")
    ap.add_argument("--window", type=int, default=LOOP_WINDOW)
    ap.add_argument("--max-period", type=int, default=LOOP_MAX_PERIOD)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.tokenizer:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(args.tokenizer)
    else:
        tok = stand_in_tokenizer()
    answers = honest_answers(args.honest)
    false_stops: list[dict[str, Any]] = []
    over_budget: Counter[str] = Counter()
    per_category = Counter(category_of(path) for path, _ in answers)
    for path, text in answers:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        at = first_stop(ids, args.window, args.max_period)
        if at is not None:
            false_stops.append({"answer": path, "stops_at_token": at})
        over_budget[category_of(path)] += len(ids) > args.budget
    out: dict[str, Any] = {
        "window_tokens": args.window, "max_period_tokens": args.max_period, "budget_tokens": args.budget,
        "tokenizer": args.tokenizer or f"stand-in: BPE {SIZES['small'].vocab_size} on torch's sources",
        "honest": {"answers": len(answers), "false_stops": len(false_stops), "which": false_stops,
                   "longer_than_budget": {c: [over_budget[c], n] for c, n in sorted(per_category.items())}},
        "completions": {},
    }
    print(f"honest answers: {len(answers)}, false stops: {len(false_stops)}, longer than the budget: "
          + ", ".join(f"{c} {over_budget[c]}/{n}" for c, n in sorted(per_category.items()) if over_budget[c]))
    for path in args.completions:
        by_problem = json.loads(path.read_text())
        rows = [c for cs in by_problem.values() for c in cs]
        keys = [(pid, k) for pid, cs in by_problem.items() for k in range(len(cs))]
        lengths, stopped = [], []
        for text in rows:
            ids = tok(text, add_special_tokens=False)["input_ids"][:args.budget]
            at = first_stop(ids, args.window, args.max_period)
            lengths.append(len(ids))
            stopped.append(len(ids) if at is None else at)
        fired = sum(a != n for a, n in zip(stopped, lengths, strict=True))
        rec: dict[str, Any] = {"completions": len(rows), "stopped": fired,
               "tokens_without": sum(lengths), "tokens_with": sum(stopped),
               "tokens_ratio": round(sum(stopped) / max(1, sum(lengths)), 3),
               "batch_tokens_without": max(lengths, default=0), "batch_tokens_with": max(stopped, default=0)}
        verdicts = read_reasons(path.parent.parent)  # the evaluation's, beside its generations
        if verdicts is not None:  # what the judge said of the completions the stop would have cut
            cut = [verdicts.get(key, "unjudged") for key, a, n in zip(keys, stopped, lengths, strict=True) if a != n]
            rec["stopped_verdicts"] = {r: cut.count(r) for r in sorted(set(cut))}
        out["completions"][str(path)] = rec
        print(f"{path}: {fired}/{len(rows)} stopped; tokens with/without the stop {rec['tokens_ratio']:.3f}; "
              f"one batch of all: {rec['batch_tokens_with']} vs {rec['batch_tokens_without']} tokens")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    sys.exit(0)


if __name__ == "__main__":
    main()
