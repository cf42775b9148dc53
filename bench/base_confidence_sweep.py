"""How confident can a tiny base get in its budget? p_t on the seed train split for variants of the tiny preset.

    PYTHONPATH=. .venv/bin/python bench/base_confidence_sweep.py --workdir /tmp/kw-sweep --json out.json \
        --variant default={} --variant long_only='{"short_share": 0.0}' --variant lr6e-3='{"learning_rate": 0.006}'

CuSeT masks floor(rho_max * high_share * n) of a sample's n confident boilerplate tokens, so the
masked share of completion tokens grows with the square of the share at p_t >= tau_high: a 5%
masked share wants about a third of the completion at p_t >= 0.9. For each variant (fields of the
tiny `Preset` overridden, JSON), this pretrains a tiny base in the size's wall-clock budget on
the installed packages' code, scores the seed train split by teacher forcing as `curate` does
(`--nvrtc false`: NVRTC does not change p_t), and reports the share of completion tokens at each
confidence threshold (sensitive and other apart), the masked share, and how much of the
completion the base could copy: the share of tokens that end a 5-token run seen earlier in the
same sample, the share of those at p_t >= 0.9, and the share a pure copier gets right (the token
that followed the last occurrence of the 5 tokens before it), with the masked share the default
constants would give if the base were sure of all of those; and whether it copies at all: its mean p_t on
the second copy of a run of random tokens written twice (about 1/vocab without an induction
head). One variant at a time (each takes the budget, 3 minutes by default, plus about a minute
of scoring; all on `--threads` threads).
`--json` writes every row.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from kernelwright.base_model import config as base_config
from kernelwright.base_model import pretrain as base
from kernelwright.curation.config import CurateConfig
from kernelwright.curation.outputs import HEADLINE
from kernelwright.curation.stage import run_curate
from kernelwright.curation.weights import CusetParams, token_weights
from kernelwright.tracking import setup_tracking, stage_run
from kernelwright.workdir import resolve_workdir

THRESHOLDS = (0.5, 0.7, 0.8, 0.9, 0.95, 0.99)
COPY_RUN = 5  # tokens: a run this long seen before in the sample makes the last one copyable


def _copyable(ids: list[int], p: list[float], start: int) -> tuple[int, int, int]:
    """(completion tokens scored, copyable ones, copyable ones at p_t >= 0.9)."""
    seen: set[tuple[int, ...]] = set()
    scored = copyable = confident = 0
    for i in range(len(ids)):
        run = tuple(ids[max(0, i - COPY_RUN + 1): i + 1])
        if i >= start and i >= COPY_RUN:
            scored += 1
            if run in seen:
                copyable += 1
                confident += p[i] >= 0.9
        seen.add(run)
    return scored, copyable, confident


def _copied_flags(ids: list[int], start: int) -> list[bool]:
    """Per token: whether copying the continuation of the last occurrence of the 5 tokens before it is right."""
    after: dict[tuple[int, ...], int] = {}
    out = []
    for i in range(len(ids)):
        before = tuple(ids[max(0, i - COPY_RUN): i])
        out.append(i >= max(start, COPY_RUN) and after.get(before) == ids[i])
        after[before] = ids[i]
    return out


def masked_share_if_copying(rows: list[dict], copied: list[list[bool]]) -> float:
    """The masked share of completion tokens under the default CuSeT constants if the base were also sure
    (p_t = 1) of every token that copying from context gets right (`copied`, per row of the curated
    Parquet): the most copying could add."""
    frames = []
    for sample, (row, flags) in enumerate(zip(rows, copied, strict=True)):
        k, n = row["prompt_len"], len(row["input_ids"])
        p = [None if i < k else (1.0 if flags[i] else row["p"][i]) for i in range(n)]
        frames.append(pl.DataFrame({"sample": [sample] * n, "pos": list(range(n)), "p": p, "c": row["sensitive"],
                                    "completion": [i >= k for i in range(n)]}, schema_overrides={"p": pl.Float64}))
    t = token_weights(pl.concat(frames).lazy(), CusetParams(mask_target="confident")).collect()
    return float(t["masked"].sum() / t["completion"].sum())


def confidence_figures(curated: Path) -> dict[str, float]:
    """The curate run's own figures (report.json) and the shares of completion tokens at each p_t
    threshold, of copyable ones and of copied ones, from the curated Parquet in `curated`."""
    stats = json.loads((curated / "report.json").read_text())["stats"]
    rows = list(pl.read_parquet(curated / "data.parquet").iter_rows(named=True))
    copied = [_copied_flags(row["input_ids"], row["prompt_len"]) for row in rows]
    ps, sens, totals = [], [], np.zeros(3)
    for row in rows:
        k = row["prompt_len"]
        ps.append(np.asarray(row["p"][k:], dtype=float))
        sens.append(np.asarray(row["sensitive"][k:], dtype=bool))
        totals += _copyable(row["input_ids"], row["p"], k)
    p, s = np.concatenate(ps), np.concatenate(sens)
    out = {"completion_tokens": float(len(p)), **{k: float(stats[k]) for k in HEADLINE if k in stats}}
    for t in THRESHOLDS:
        out[f"share_p_ge_{t}"] = float((p >= t).mean())
        out[f"share_p_ge_{t}_sensitive"] = float((p[s] >= t).mean())
        out[f"share_p_ge_{t}_other"] = float((p[~s] >= t).mean())
    out["copyable_share"] = float(totals[1] / totals[0])
    out["copyable_confident_share"] = float(totals[2] / max(totals[1], 1))
    out["copy_oracle_share"] = float(sum(map(sum, copied)) / totals[0])
    out["masked_share_if_copying"] = masked_share_if_copying(rows, copied)
    return out


@torch.inference_mode()
def induction_figures(model_dir: Path, run: int = 256, rows: int = 4) -> dict[str, float]:
    """How well the base copies from context: p_t over the second half of runs of random tokens written twice
    (ordinary tokens of its vocabulary; only attending back to the first copy predicts them)."""
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    special = set(AutoTokenizer.from_pretrained(model_dir).all_special_ids)
    vocab = torch.tensor([i for i in range(model.config.vocab_size) if i not in special])
    first = vocab[torch.randint(0, len(vocab), (rows, run), generator=torch.Generator().manual_seed(0))]
    ids = torch.cat([first, first], 1)
    logp = model(input_ids=ids).logits[:, run:-1].log_softmax(-1)
    p = logp.gather(-1, ids[:, run + 1:, None]).exp()
    return {"induction_mean_p": float(p.mean()), "induction_share_p_ge_0.9": float((p >= 0.9).float().mean())}


def run_variant(name: str, overrides: dict, workdir: Path, threads: int) -> dict:
    preset = base_config.SIZES["tiny"]
    base_config.SIZES["tiny"] = replace(preset, **overrides)
    try:
        out = workdir / name
        result = base.run_pretrain(base_config.PretrainConfig(workdir=str(workdir), out=str(out), register=False,
                                                      threads=threads))
    finally:
        base_config.SIZES["tiny"] = preset
    with stage_run("curate", tags={"kw.sweep": name}):
        run_curate(CurateConfig(base_model=str(out), out=str(workdir / f"{name}-curated"), workdir=str(workdir),
                                nvrtc=False))
    return {"variant": name, "overrides": overrides, "tokens": result.tokens, "steps": result.steps,
            "wall_s": result.wall_s, "heldout_bits_per_char": result.heldout_bits_per_char,
            **confidence_figures(workdir / f"{name}-curated"), **induction_figures(out)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", default="/tmp/kw-sweep")
    ap.add_argument("--variant", action="append", default=[], help="NAME=JSON of tiny Preset fields")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="CPU threads of every variant's pretraining (default: every core; the same for all)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    variants = [v.split("=", 1) for v in (args.variant or ["default={}"])]
    workdir = resolve_workdir(args.workdir)
    setup_tracking(workdir)
    rows = []
    for name, spec in variants:
        rows.append(run_variant(name, json.loads(spec), workdir, args.threads))
        r = rows[-1]
        bits = r["heldout_bits_per_char"] or float("nan")
        print(f"{name:>12}  tokens {r['tokens'] / 1e6:5.2f}M  bits/char {bits:.3f}  "
              f"p>=0.9 {r['share_p_ge_0.9']:.3f}  masked {r['masked_share']:.4f}  "
              f"copyable {r['copyable_share']:.3f} (confident {r['copyable_confident_share']:.3f})  "
              f"induction p {r['induction_mean_p']:.3f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"command": "bench/base_confidence_sweep.py", "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
