"""CuSeT token and sample weights from p_t and c_t, in Polars (../shared/design/cuset.md).

    .venv/bin/python -m pytest tests/curation/test_weights.py tests/curation/test_cuset_by_hand.py
    .venv/bin/python bench/curation_weights.py        # speed, and equality with a plain loop

Input: one row per token with `sample` (int), `pos` (token index in the sequence), `completion`
(bool: a completion token, i.e. one the loss sees), `p` (base-model probability of the gold
token; null on prompt tokens) and `c` (bool: overlaps a CUDA-critical span).

Per completion token t of sample s (T_s completion tokens):
  high = p >= tau_high,  low = p < tau_low
  regions: maximal runs of tokens with c and low (candidates), merged across gaps of <= region_gap
           tokens; every token from a region's first to its last candidate belongs to it (region_id)
  R_s = tokens in regions / T_s
  boilerplate = not c and high and not in a region; the
           k_s = floor(rho_max * mean(high) * n_boilerplate_s) most confident of them are masked
           (equal p: the earlier token first)
  m_t = 0 for masked tokens and prompt tokens, else 1;  a_t = alpha if c and high, else 1
  token_weight = m_t * a_t
  w_s = clip(1 + lambda * R_s / mean(R), w_min, w_max) / mean(...)   (all 1 if mean(R) == 0)
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl


@dataclass(frozen=True)
class CusetParams:
    """The CuSeT constants, defaults from cuset.md."""

    tau_high: float = 0.9
    tau_low: float = 0.5
    region_gap: int = 2
    rho_max: float = 0.5
    alpha: float = 1.0
    lam: float = 1.0
    w_min: float = 0.5
    w_max: float = 3.0


_I64 = pl.Int64


def _regions(t: pl.LazyFrame, gap: int) -> pl.LazyFrame:
    """Add region_id: rows sorted by (sample, pos), `_g` the row number, `_first` a sample's first row.

    A candidate opens a new region unless the previous candidate is in the same sample and at most
    gap + 1 rows back. Numbering the regions globally (a running count of openings), a token is
    inside a region exactly when the last candidate at or before it and the first candidate at or
    after it carry the same number; the sample's count of earlier regions makes the id local.
    """
    g = pl.col("_g")
    prev = pl.when("_cand").then(g).shift(1).forward_fill()
    same_run = (prev >= pl.when("_first").then(g).forward_fill()) & (g - prev <= gap + 1)
    return (
        t.with_columns(_new=pl.col("_cand") & ~same_run.fill_null(False))
        .with_columns(_n=pl.col("_new").cast(_I64).cum_sum())
        .with_columns(
            _rf=pl.when("_cand").then("_n").forward_fill(),
            _rb=pl.when("_cand").then("_n").backward_fill(),
            _before=pl.when("_first").then(pl.col("_n") - pl.col("_new").cast(_I64)).forward_fill(),
        )
        .with_columns(
            region_id=pl.when(pl.col("_rf") == pl.col("_rb")).then(pl.col("_rf") - pl.col("_before") - 1)
            .cast(pl.Int32)
        )
        .drop("_new", "_n", "_rf", "_rb", "_before")
    )


def token_weights(tokens: pl.LazyFrame, params: CusetParams) -> pl.LazyFrame:
    """Add high, low, region_id, boiler, masked, loss_mask (m_t) and token_weight (m_t * a_t) per token.

    Rows come back sorted by (sample, pos). Runs on Polars' in-memory engine (fills, running sums
    and windows are several times faster there than under the streaming default) and returns the
    result as a LazyFrame; bench/curation_weights.py measures it.
    """
    t = tokens.sort("sample", "pos").with_columns(
        high=pl.col("completion") & (pl.col("p") >= params.tau_high).fill_null(False),
        low=pl.col("completion") & (pl.col("p") < params.tau_low).fill_null(False),
        _g=pl.int_range(pl.len(), dtype=_I64),
        _first=(pl.col("sample") != pl.col("sample").shift(1)).fill_null(True),
    ).with_columns(_cand=pl.col("c") & pl.col("low"))
    t = _regions(t, params.region_gap).with_columns(
        boiler=pl.col("completion") & ~pl.col("c") & pl.col("high") & pl.col("region_id").is_null()
    )
    share_high = pl.col("high").sum() / pl.col("completion").sum().clip(lower_bound=1)
    t = (
        t.with_columns(
            _k=(params.rho_max * share_high * pl.col("boiler").sum()).floor().over("sample"),
            _rank=pl.when("boiler").then("p").otherwise(-1.0).rank("ordinal", descending=True).over("sample"),
        )
        .with_columns(masked=pl.col("boiler") & (pl.col("_rank") <= pl.col("_k")))
        .with_columns(loss_mask=pl.col("completion") & ~pl.col("masked"))
        .with_columns(
            token_weight=pl.when(pl.col("loss_mask"))
            .then(pl.when(pl.col("c") & pl.col("high")).then(params.alpha).otherwise(1.0))
            .otherwise(0.0)
            .cast(pl.Float32)
        )
        .drop("_g", "_first", "_cand", "_k", "_rank")
    )
    return t.collect(engine="in-memory").lazy()


def sample_weights(tokens: pl.LazyFrame, params: CusetParams) -> pl.LazyFrame:
    """Per sample: T (completion tokens), R (region share), share_high, mask_share and sample_weight."""
    per = tokens.group_by("sample").agg(
        T=pl.col("completion").sum(),
        in_region=(pl.col("completion") & pl.col("region_id").is_not_null()).sum(),
        n_high=pl.col("high").sum(),
        n_masked=pl.col("masked").sum(),
    ).with_columns(
        R=pl.col("in_region") / pl.col("T").clip(lower_bound=1),
        share_high=pl.col("n_high") / pl.col("T").clip(lower_bound=1),
        mask_share=pl.col("n_masked") / pl.col("T").clip(lower_bound=1),
    )
    mean_r = pl.col("R").mean()
    raw = pl.when(mean_r > 0).then(
        (1.0 + params.lam * pl.col("R") / mean_r).clip(params.w_min, params.w_max)
    ).otherwise(1.0)
    return (
        per.with_columns(w_raw=raw)
        .with_columns(sample_weight=(pl.col("w_raw") / pl.col("w_raw").mean()).cast(pl.Float32))
        .drop("w_raw")
        .sort("sample")
    )
