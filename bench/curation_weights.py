"""The Polars CuSeT stage against the same algebra in a plain Python loop, on synthetic tokens.

    .venv/bin/python bench/curation_weights.py [--samples 2000] [--json docs/results/curation_weights_cpu.json]

The Polars stage is what `curate_samples` runs after scoring: `mark_sensitive` (c_t and span kind
from character spans), `token_weights` (high/low, regions, masking, m_t, a_t) and
`sample_weights` (R_s, clipped and renormalised w_s). The loop computes the same quantities one
sample and one token at a time (bisect for span overlaps), as a careful person would write it in
plain Python. Both run in this process on the same data; their outputs must agree (token
weights, masks, c_t, span kinds, region ids exactly; R_s and w_s to 1e-9, w_s after the same
float32 rounding). Prints tokens/s of each and their ratio; writes the figures as JSON.

Timing: `--rounds` rounds, each `--repeats` Polars runs then one loop run, interleaved so that a
burst of load on a shared box hits both; each side's figure is its best run over all rounds
(as `timeit` takes the minimum), and the JSON keeps every round's pair.

The data imitate curated samples: ~600 tokens each (prompt 80-200, completion 350-650), 1-6
characters a token, 10-40 CUDA spans of 3-60 characters a completion (they nest and overlap),
p_t mostly confident (70% in [0.9, 1), the rest uniform in [0, 0.9)).
"""

from __future__ import annotations

import argparse
import bisect
import math
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TypeVar

import numpy as np
import polars as pl

from kernelwright import atomic
from kernelwright.curation.sensitive import mark_sensitive
from kernelwright.curation.weights import CusetParams, sample_weights, token_weights

KINDS = ["barrier", "shared_decl", "thread_index", "global_access", "bounds_guard", "launch_config",
         "atomic", "warp_intrinsic", "launch_bounds", "memory_api"]
PARAMS = CusetParams(alpha=1.5, mask_target="confident")  # reading A, as the loop below; alpha != 1: a_t exercised
T = TypeVar("T")


def synthetic(n_samples: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(tokens, spans) frames in the shape `curate_samples` builds them."""
    rng = np.random.default_rng(seed)
    n_prompt = rng.integers(80, 201, n_samples)
    n_comp = rng.integers(350, 651, n_samples)
    n_tok = n_prompt + n_comp
    sample = np.repeat(np.arange(n_samples), n_tok)
    pos = np.arange(n_tok.sum()) - np.repeat(np.cumsum(n_tok) - n_tok, n_tok)
    completion = pos >= np.repeat(n_prompt, n_tok)
    width = rng.integers(1, 7, n_tok.sum()) * completion  # characters; 0 on the prompt
    chars = np.bincount(sample, weights=width, minlength=n_samples).astype(np.int64)
    tok_end = np.cumsum(width) - np.repeat(np.cumsum(chars) - chars, n_tok)
    tok_start = tok_end - width
    confident = rng.random(n_tok.sum()) < 0.7
    p = np.where(confident, rng.uniform(0.9, 1.0, n_tok.sum()), rng.uniform(0.0, 0.9, n_tok.sum()))
    tokens = pl.DataFrame({
        "sample": sample.astype(np.int64), "pos": pos.astype(np.int64), "completion": completion,
        "p": pl.Series(p).set(pl.Series(~completion), None),
        "tok_start": pl.Series(tok_start).set(pl.Series(~completion), None),
        "tok_end": pl.Series(tok_end).set(pl.Series(~completion), None),
    })
    n_spans = rng.integers(10, 41, n_samples)
    span_sample = np.repeat(np.arange(n_samples), n_spans)
    s_start = (rng.random(n_spans.sum()) * np.repeat(chars, n_spans)).astype(np.int64)
    s_end = np.minimum(s_start + rng.integers(3, 61, n_spans.sum()), np.repeat(chars, n_spans))
    spans = pl.DataFrame({"sample": span_sample.astype(np.int64), "s_start": s_start, "s_end": s_end,
                          "kind": rng.choice(KINDS, n_spans.sum())})
    return tokens, spans


def polars_stage(tokens: pl.DataFrame, spans: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Exactly the calls `curate_samples` makes."""
    marked = mark_sensitive(tokens.lazy(), spans.lazy(), in_order=True)
    weighted = token_weights(marked, PARAMS, in_order=True).collect()
    per_sample = sample_weights(weighted.lazy(), PARAMS).collect()
    return weighted, per_sample


def _loop_sample(toks: list[tuple], spans: list[tuple], prm: CusetParams) -> tuple[list[tuple], tuple]:
    """One sample: toks = [(completion, p, tok_start, tok_end)] in pos order; spans = [(s, e, kind)]."""
    n = len(toks)
    kind: list[str | None] = [None] * n
    best = [math.inf] * n
    ends = [t[3] if t[0] else -1 for t in toks]
    starts = [t[2] if t[0] else -1 for t in toks]
    for s, e, k in sorted(spans, key=lambda x: (x[1] - x[0], x[0], x[2])):
        lo = bisect.bisect_right(ends, s)  # first token with tok_end > s
        hi = bisect.bisect_left(starts, e)  # first token with tok_start >= e
        for i in range(lo, hi):
            if toks[i][0] and e - s < best[i]:
                best[i], kind[i] = e - s, k
    c = [k is not None for k in kind]
    high = [t[0] and t[1] >= prm.tau_high for t in toks]
    low = [t[0] and t[1] < prm.tau_low for t in toks]
    region: list[int | None] = [None] * n
    cands = [i for i in range(n) if c[i] and low[i]]
    rid, prev = -1, -math.inf
    for i in cands:  # a new region when the step from the previous candidate exceeds gap + 1
        if i - prev > prm.region_gap + 1:
            rid, fill_from = rid + 1, i
        else:
            fill_from = int(prev) + 1
        for q in range(fill_from, i + 1):
            region[q] = rid
        prev = i
    boiler = [toks[i][0] and not c[i] and high[i] and region[i] is None for i in range(n)]
    t_count = sum(1 for t in toks if t[0])
    n_boiler = sum(boiler)
    share_high = sum(high) / max(t_count, 1)
    k_mask = math.floor(prm.rho_max * share_high * n_boiler)
    ranked = sorted((i for i in range(n) if boiler[i]), key=lambda i: -toks[i][1])
    masked = [False] * n
    for i in ranked[:k_mask]:
        masked[i] = True
    rows = []
    for i, t in enumerate(toks):
        keep = t[0] and not masked[i]
        weight = (prm.alpha if c[i] and high[i] else 1.0) if keep else 0.0
        rows.append((c[i], kind[i], region[i], masked[i], keep, weight))
    in_region = sum(1 for i in range(n) if toks[i][0] and region[i] is not None)
    return rows, (t_count, in_region / max(t_count, 1), sum(masked) / max(t_count, 1))


def loop_stage(tokens: pl.DataFrame, spans: pl.DataFrame, prm: CusetParams) -> tuple[list[tuple], list[float],
                                                                                     list[float]]:
    """The same algebra in plain Python; per-token rows in (sample, pos) order, R_s, w_s."""
    by_sample: dict[int, list[tuple]] = {}
    for s, st, en, k in spans.iter_rows():
        by_sample.setdefault(s, []).append((st, en, k))
    per_token: list[tuple] = []
    r_values: list[float] = []
    current: int = -1
    toks: list[tuple] = []
    for s, _pos, comp, p, st, en in tokens.iter_rows():
        if s != current and toks:
            rows, (_, r, _) = _loop_sample(toks, by_sample.get(current, []), prm)
            per_token += rows
            r_values.append(r)
            toks = []
        current = s
        toks.append((comp, p, st, en))
    rows, (_, r, _) = _loop_sample(toks, by_sample.get(current, []), prm)
    per_token += rows
    r_values.append(r)
    mean_r = sum(r_values) / len(r_values)
    raw = [min(max(1 + prm.lam * r / mean_r, prm.w_min), prm.w_max) if mean_r > 0 else 1.0 for r in r_values]
    mean_raw = sum(raw) / len(raw)
    return per_token, r_values, [w / mean_raw for w in raw]


def check_equal(weighted: pl.DataFrame, per_sample: pl.DataFrame, loop: tuple) -> None:
    per_token, r_values, w_values = loop
    got = weighted.select("c", "span_kind", "region_id", "masked", "loss_mask", "token_weight").rows()
    assert len(got) == len(per_token), (len(got), len(per_token))
    for i, (a, b) in enumerate(zip(got, per_token, strict=True)):
        if a != b:
            raise AssertionError(f"token row {i}: polars {a} != loop {b}")
    r_pl = per_sample["R"].to_numpy()
    w_pl = per_sample["sample_weight"].to_numpy()
    assert np.abs(r_pl - np.array(r_values)).max() <= 1e-9
    assert np.abs(w_pl.astype(np.float64) - np.array(w_values, dtype=np.float32).astype(np.float64)).max() <= 1e-9


def timed(fn: Callable[[], T], repeats: int) -> tuple[float, T]:
    """(best seconds of `repeats` calls, the last result)."""
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3, help="Polars runs per round (the loop runs once a round)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; each side's best run counts")
    ap.add_argument("--json", default="docs/results/curation_weights_cpu.json")
    args = ap.parse_args()
    tokens, spans = synthetic(args.samples, args.seed)
    n_tokens, n_comp = tokens.height, int(tokens["completion"].sum())
    rounds = []
    for _ in range(max(args.rounds, 1)):
        pl_round, (weighted, per_sample) = timed(lambda: polars_stage(tokens, spans), max(args.repeats, 1))
        loop_round, loop = timed(lambda: loop_stage(tokens, spans, PARAMS), 1)
        rounds.append({"polars_s": pl_round, "loop_s": loop_round, "ratio": loop_round / pl_round})
    pl_s, loop_s = min(r["polars_s"] for r in rounds), min(r["loop_s"] for r in rounds)
    check_equal(weighted, per_sample, loop)
    result = {
        "samples": args.samples, "tokens": n_tokens, "completion_tokens": n_comp, "spans": spans.height,
        "polars_s": pl_s, "loop_s": loop_s,
        "polars_tokens_per_s": n_tokens / pl_s, "loop_tokens_per_s": n_tokens / loop_s, "ratio": loop_s / pl_s,
        "rounds": rounds, "repeats": args.repeats, "outputs_equal": True,
        "polars": pl.__version__, "threads": pl.thread_pool_size(),
        "cpus": os.cpu_count(), "machine": platform.processor() or platform.machine(), "params": asdict(PARAMS),
    }
    print(f"{n_tokens:,} tokens ({n_comp:,} completion), {args.samples} samples, {spans.height:,} spans, "
          f"{pl.thread_pool_size()} Polars threads")
    print(f"polars: {pl_s:.3f} s  {result['polars_tokens_per_s'] / 1e6:.2f} M tokens/s")
    print(f"loop:   {loop_s:.3f} s  {result['loop_tokens_per_s'] / 1e6:.3f} M tokens/s")
    print(f"ratio:  {result['ratio']:.1f}x   outputs equal: yes")
    atomic.write_json(Path(args.json), result)


if __name__ == "__main__":
    main()
