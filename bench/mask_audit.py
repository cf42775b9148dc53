"""What CuSeT's mask takes: the masked completion tokens of a curated folder, by kind.

    PYTHONPATH=. .venv/bin/python bench/mask_audit.py W/curated --tokenizer W/base-model --json out.json

Each masked token (loss_mask < 1 on a completion token) is put in one kind, by the characters it
overlaps in its decoded answer: `name_reused` (a name already used in the prompt or earlier in the
answer), `name_common` (a name in many answers: `free_choices.common_names`), `name_first_use`,
`number` (a number literal), `syntax` (anything else: punctuation, whitespace, quotes, fences).
Prints the shares, the most masked strings of each kind, and writes JSON. Samples whose completion
does not re-tokenise to the same ids (rare) are skipped and counted.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl

from kernelwright.curation.free_choices import KINDS, SYNTAX, char_kinds, common_names

ORDER = (*KINDS[1:], KINDS[SYNTAX])  # as reported: the names, numbers, then syntax


def token_kind(kinds: bytearray, start: int, end: int) -> str:
    """A token's kind: of the kinds among its characters, the first of KINDS after syntax (a token across a name
    and a bracket is a name); syntax when it has no other."""
    present = set(kinds[start:end]) - {SYNTAX}
    return KINDS[min(present) if present else SYNTAX]


def audit(curated: Path, tokenizer: Any, top: int = 12) -> dict[str, Any]:
    data = pl.read_parquet(curated / "data.parquet", columns=["input_ids", "labels", "loss_mask", "prompt_len"])
    counts: Counter[str] = Counter()
    examples: dict[str, Counter[str]] = {k: Counter() for k in ORDER}
    completion_tokens = skipped = 0
    common = common_names(tokenizer.decode(r["input_ids"][r["prompt_len"]:]) for r in data.iter_rows(named=True))
    for row in data.iter_rows(named=True):
        ids, n = row["input_ids"], row["prompt_len"]
        text = tokenizer.decode(ids[n:])
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        if list(enc["input_ids"]) != list(ids[n:]):
            skipped += 1
            continue
        kinds = char_kinds(tokenizer.decode(ids[:n]), text, common)
        for k, (start, end) in enumerate(enc["offset_mapping"]):
            if row["labels"][n + k] == -100:
                continue
            completion_tokens += 1
            if row["loss_mask"][n + k] < 1:
                kind = token_kind(kinds, start, end)
                counts[kind] += 1
                examples[kind][text[start:end]] += 1
    masked = sum(counts.values())
    return {
        "curated": str(curated), "samples": data.height - skipped, "skipped": skipped,
        "completion_tokens": completion_tokens, "masked": masked,
        "masked_share": masked / max(completion_tokens, 1),
        "of_masked": {k: counts[k] / max(masked, 1) for k in ORDER},
        "most_masked": {k: examples[k].most_common(top) for k in ORDER},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("curated", type=Path, help="a folder `kernelwright curate` wrote (data.parquet)")
    parser.add_argument("--tokenizer", type=Path, required=True, help="the base model folder it was curated with")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    from transformers import AutoTokenizer

    result = audit(args.curated, AutoTokenizer.from_pretrained(args.tokenizer))
    shares = ", ".join(f"{k} {v:.1%}" for k, v in result["of_masked"].items())
    sys.stdout.write(f"{result['curated']}: {result['masked']} of {result['completion_tokens']} completion tokens "
                     f"masked ({result['masked_share']:.1%}); of the masked: {shares}\n")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
