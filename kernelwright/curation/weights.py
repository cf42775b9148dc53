"""CuSeT token and sample weights from p_t and c_t, in Polars (../shared/design/cuset.md).

Input: one row per token with `sample` (int), `pos` (token index in the sequence), `completion`
(bool: a completion token, i.e. one the loss sees), `p` (base-model probability of the gold
token; null on prompt tokens) and `c` (bool: overlaps a CUDA-critical span).

Per completion token t of sample s (T_s completion tokens):
  high = p >= tau_high,  low = p < tau_low
  regions: maximal runs of tokens with c and low, merged across gaps of <= region_gap tokens;
           every token from a region's first to its last candidate belongs to it (region_id)
  R_s = tokens in regions / T_s
  boilerplate = not c and high and not in a region; the
           k_s = floor(rho_max * mean(high) * n_boilerplate_s) most confident of them are masked
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


def _regions(tokens: pl.LazyFrame, gap: int) -> pl.LazyFrame:
    """One row per region: sample, region_id (0-based within the sample), first and last pos."""
    cands = (
        tokens.filter(pl.col("candidate"))
        .select("sample", "pos")
        .sort("sample", "pos")
        .with_columns(step=pl.col("pos") - pl.col("pos").shift(1).over("sample"))
        .with_columns(new=pl.col("step").is_null() | (pl.col("step") > gap + 1))
        .with_columns(region_id=(pl.col("new").cast(pl.Int32).cum_sum().over("sample") - 1))
    )
    return cands.group_by("sample", "region_id").agg(
        r_start=pl.col("pos").min(), r_end=pl.col("pos").max()
    ).sort("sample", "r_start")


def token_weights(tokens: pl.LazyFrame, params: CusetParams) -> pl.LazyFrame:
    """Add high, low, region_id, masked, loss_mask (m_t) and token_weight (m_t * a_t) per token."""
    t = tokens.sort("sample", "pos").with_columns(
        high=pl.col("completion") & (pl.col("p") >= params.tau_high).fill_null(False),
        low=pl.col("completion") & (pl.col("p") < params.tau_low).fill_null(False),
    ).with_columns(candidate=pl.col("c") & pl.col("low"))
    regions = _regions(t, params.region_gap)
    t = (
        t.join_asof(regions, left_on="pos", right_on="r_start", by="sample", strategy="backward")
        .with_columns(
            region_id=pl.when(pl.col("completion") & (pl.col("pos") <= pl.col("r_end")))
            .then(pl.col("region_id"))
            .otherwise(None)
        )
        .drop("r_start", "r_end")
        .with_columns(
            boiler=pl.col("completion") & ~pl.col("c") & pl.col("high") & pl.col("region_id").is_null()
        )
    )
    per_sample = t.group_by("sample").agg(
        n_completion=pl.col("completion").sum(),
        n_high=pl.col("high").sum(),
        n_boiler=pl.col("boiler").sum(),
    ).with_columns(
        share_high=pl.col("n_high") / pl.col("n_completion").clip(lower_bound=1),
    ).with_columns(
        n_mask=(params.rho_max * pl.col("share_high") * pl.col("n_boiler")).floor().cast(pl.Int64)
    )
    t = (
        t.join(per_sample.select("sample", "n_mask"), on="sample", how="left")
        .with_columns(
            boiler_rank=pl.when(pl.col("boiler"))
            .then(pl.col("p").rank(method="ordinal", descending=True).over("sample", "boiler"))
            .otherwise(None)
        )
        .with_columns(masked=pl.col("boiler") & (pl.col("boiler_rank") <= pl.col("n_mask")))
        .with_columns(loss_mask=pl.col("completion") & ~pl.col("masked"))
        .with_columns(
            token_weight=pl.when(pl.col("loss_mask"))
            .then(pl.when(pl.col("c") & pl.col("high")).then(params.alpha).otherwise(1.0))
            .otherwise(0.0)
            .cast(pl.Float32)
        )
        .drop("boiler_rank", "n_mask", "candidate")
        .sort("sample", "pos")
    )
    return t


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
