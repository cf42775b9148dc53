"""Token-level NLL on held-out curated samples: CUDA-sensitive tokens vs the others, per trained model.

    PYTHONPATH=. .venv/bin/python bench/heldout_token_nll.py --data DIR/curated-test MODEL [MODEL ...] \
        [--json out.json] [--mlflow-parent-run-id RUN]

`--data` is a `kernelwright curate --split test` folder made with the same base model (so its
token ids are the models' own); every MODEL is a trained checkpoint folder. For each, the mean
negative log-likelihood (nats) of the completion tokens by teacher forcing, split by the curated
`sensitive` flag (c_t); `nll_masked` is over the other tokens CuSeT's rule would mask there (the
curated `loss_mask` under 1, hard or soft, by the reading the data was curated with), a subset of `nll_other`. With
`--mlflow-parent-run-id`, each model's figures are logged as a child run `heldout-nll` of that run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import mlflow
import polars as pl
import torch

from kernelwright.models import load_base_model


def token_nll(model_dir: Path, data: pl.DataFrame) -> dict[str, float]:
    model = load_base_model(model_dir).eval()
    device = next(model.parameters()).device
    sums = {"sensitive": 0.0, "other": 0.0, "masked": 0.0}
    counts = {"sensitive": 0, "other": 0, "masked": 0}
    for row in data.iter_rows(named=True):
        ids = torch.tensor([row["input_ids"]], device=device)
        with torch.inference_mode():
            logits = model(input_ids=ids, use_cache=False).logits[0, :-1].float()
        nll = torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="none").cpu().tolist()
        for t in range(row["prompt_len"], len(row["input_ids"])):
            key = "sensitive" if row["sensitive"][t] else "other"
            sums[key] += nll[t - 1]
            counts[key] += 1
            if key == "other" and row["loss_mask"][t] < 1:
                sums["masked"] += nll[t - 1]
                counts["masked"] += 1
    return {f"nll_{k}": sums[k] / max(counts[k], 1) for k in sums} | {f"tokens_{k}": float(v)
                                                                      for k, v in counts.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--json", default=None)
    ap.add_argument("--mlflow-parent-run-id", default=None)
    args = ap.parse_args()
    data = pl.read_parquet(Path(args.data) / "data.parquet")
    rows = {m: token_nll(Path(m), data) for m in args.models}
    for m, r in rows.items():
        print(f"{m}: NLL sensitive {r['nll_sensitive']:.4f}, other {r['nll_other']:.4f}, of which masked "
              f"{r['nll_masked']:.4f} ({int(r['tokens_sensitive'])} / {int(r['tokens_other'])} / "
              f"{int(r['tokens_masked'])} tokens)")
        if args.mlflow_parent_run_id:
            with mlflow.start_run(run_name="heldout-nll", nested=True,
                                  tags={"mlflow.parentRunId": args.mlflow_parent_run_id, "kw.model": m}):
                mlflow.log_metrics(r)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
