"""Padding per epoch under each training sample order, on a curated folder (any machine).

    .venv/bin/python bench/train_padding.py --data .kernelwright/curated --batch 32 --json out.json

A training batch is padded to its longest sample (truncated at --max-length), so every padded
token is computed and thrown away. For `kernelwright train --sampling random` (the default) and
`--sampling group_by_length` (transformers' LengthGroupedSampler), this walks one epoch of the
samplers the trainer builds (seeded like it), and counts the tokens computed (batch size x longest
sample) against the real ones. Printed and saved: the padding share of each, and the ratio of the
tokens computed, random / group_by_length, measured in the same run: about the speed-up of a step
on a GPU where the step's cost follows its tokens.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch
from transformers.trainer_pt_utils import LengthGroupedSampler

from kernelwright.training.data import load_curated


def batches_of(order: list[int], batch: int) -> list[list[int]]:
    return [order[i:i + batch] for i in range(0, len(order), batch)]


def padding(lengths: list[int], order: list[int], batch: int) -> dict[str, Any]:
    """Tokens computed (each batch padded to its longest sample) against the real ones, over `order`."""
    real = computed = 0
    for b in batches_of(order, batch):
        sizes = [lengths[i] for i in b]
        real += sum(sizes)
        computed += len(sizes) * max(sizes)
    return {"real_tokens": real, "computed_tokens": computed, "padding_share": 1 - real / computed if computed else 0.0}


def orders(lengths: list[int], batch: int, seed: int) -> dict[str, list[int]]:
    """One epoch's sample order under each sampling, drawn as the trainer draws it."""
    random = torch.randperm(len(lengths), generator=torch.Generator().manual_seed(seed)).tolist()
    grouped = list(LengthGroupedSampler(batch, lengths=lengths, generator=torch.Generator().manual_seed(seed)))
    return {"random": random, "group_by_length": grouped}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="a curated folder (data.parquet)")
    ap.add_argument("--batch", type=int, default=32, help="samples per batch (per device x accumulation)")
    ap.add_argument("--max-length", type=int, default=4096, help="train's --max-length")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    dataset, _ = load_curated(args.data)
    lengths = [min(len(ids), args.max_length) for ids in dataset["input_ids"]]
    rows = []
    for seed in range(args.seeds):
        for name, order in orders(lengths, args.batch, seed).items():
            rows.append({"seed": seed, "sampling": name, **padding(lengths, order, args.batch)})
    computed = {n: sum(r["computed_tokens"] for r in rows if r["sampling"] == n) for n in ("random", "group_by_length")}
    ratio = computed["random"] / computed["group_by_length"]
    for r in rows:
        print(f"seed {r['seed']}  {r['sampling']:16s} padding {r['padding_share']:.1%} "
              f"({r['computed_tokens']:,} tokens computed for {r['real_tokens']:,})")
    print(f"tokens computed per epoch, random / group_by_length: {ratio:.2f}x "
          f"({len(lengths):,} samples, batch {args.batch}, mean length {sum(lengths) / len(lengths):.0f})")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"data": str(args.data), "samples": len(lengths), "batch": args.batch,
                                         "max_length": args.max_length, "ratio_computed_random_over_grouped": ratio,
                                         "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
