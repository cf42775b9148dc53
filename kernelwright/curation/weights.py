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


KEY_BASE = 1 << 32
"""pos and character offsets stay below this, so sample * KEY_BASE + x orders rows by (sample, x)."""


def sample_key(x: pl.Expr) -> pl.Expr:
    """sample * KEY_BASE + x: one Int64 that orders (sample, x) for 0 <= x < KEY_BASE."""
    return pl.col("sample") * KEY_BASE + x


def sorted_by_sample_pos(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` sorted by (sample, pos) with `sample` flagged sorted; not re-sorted when it already is.

    The check is one sortedness test of the key sample * KEY_BASE + pos (three passes over a
    column); a two-column sort of 1M rows costs several times that.
    """
    if frame.height > 1 and not frame.select(sample_key(pl.col("pos"))).to_series().is_sorted():
        frame = frame.sort("sample", "pos")
    return frame.with_columns(pl.col("sample").set_sorted())


def _count(flag: pl.Expr) -> pl.Expr:
    """A boolean's sum as a count of non-nulls: the same number, on a faster group-by path."""
    return pl.when(flag).then(True).count()


def _nulls(name: str, n: int, dtype: pl.DataType) -> pl.Series:
    return pl.Series(name, [], dtype=dtype).extend_constant(None, n)


def _region_ids(sample: pl.Series, cand: pl.Series, gap: int) -> pl.Series:
    """region_id per row of a frame sorted by (sample, pos), worked out on the candidate rows alone.

    A candidate opens a new region unless the previous candidate is in the same sample and at most
    gap + 1 rows back; a region covers every row from its first to its last candidate; ids count
    a sample's regions from 0.
    """
    idx = cand.arg_true()
    g, s = pl.col("g"), pl.col("s")
    rc = (
        pl.DataFrame({"g": idx.cast(pl.Int64), "s": sample.gather(idx)})
        .with_columns(_first=(s != s.shift(1)).fill_null(True))
        .with_columns(_new=pl.col("_first") | (g - g.shift(1) > gap + 1).fill_null(True))
        .with_columns(_n=pl.col("_new").cast(pl.Int32).cum_sum())
        .with_columns(
            _id=pl.col("_n") - pl.when("_first").then("_n").forward_fill(),
            _last=pl.col("_new").shift(-1).fill_null(True),
        )
    )
    starts, ends = rc.filter("_new"), rc.filter("_last")
    rows = pl.DataFrame({"lo": starts["g"], "hi": ends["g"] + 1, "id": starts["_id"]}).select(
        g=pl.int_ranges("lo", "hi"), id="id").explode("g")
    return _nulls("region_id", sample.len(), pl.Int32).scatter(rows["g"], rows["id"])


def _masked(t: pl.DataFrame, rho_max: float) -> pl.Series:
    """masked per row (rows sorted by sample): the k_s most confident boilerplate tokens of each sample.

    k_s = floor(rho_max * share_high * n_boiler). Rather than ranking the boilerplate tokens (a sort
    per sample), take the smallest of each sample's k_s largest p, thr_s (a top-k selection): the
    tokens above thr_s are masked, and of those equal to it the earliest k_s - (number above).
    """
    per = t.group_by("sample", maintain_order=True).agg(
        _t=_count(pl.col("completion")), _h=_count(pl.col("high")), _b=_count(pl.col("boiler"))
    ).select(
        "sample",
        _k=(rho_max * (pl.col("_h") / pl.col("_t").clip(lower_bound=1)) * pl.col("_b")).floor().cast(pl.UInt32),
    )
    top = pl.col("p").top_k(pl.col("_k").first())
    b = (
        t.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_g"), "sample", "p", "boiler").filter("boiler")
        .join_asof(per, on="sample")
    )
    thr = b.group_by("sample", maintain_order=True).agg(_thr=top.min())
    b = b.join_asof(thr, on="sample")
    above = b.filter(pl.col("p") > pl.col("_thr"))["_g"]
    # ties: thr_s itself is in the top k_s; where several tokens of a sample share that p, the
    # earliest k_s - (number above thr_s) of them are
    eq = b.filter(pl.col("p") == pl.col("_thr")).with_columns(
        _r=pl.int_range(pl.len()).over("sample"), _n=pl.len().over("sample"))
    tied = eq.filter(pl.col("_n") > 1)
    if tied.height:
        n_above = b.filter(pl.col("sample").is_in(tied["sample"].implode()) & (pl.col("p") > pl.col("_thr")))
        tied = tied.join(n_above.group_by("sample").agg(_a=pl.len()), on="sample", how="left").filter(
            pl.col("_r") < pl.col("_k").cast(pl.Int64) - pl.col("_a").fill_null(0).cast(pl.Int64))
    out = pl.Series("masked", [], dtype=pl.Boolean).extend_constant(False, t.height)
    return out.scatter(above, True).scatter(eq.filter(pl.col("_n") == 1)["_g"], True).scatter(tied["_g"], True)


def token_weights(tokens: pl.LazyFrame, params: CusetParams) -> pl.LazyFrame:
    """Add high, low, region_id, boiler, masked, loss_mask (m_t) and token_weight (m_t * a_t) per token.

    Rows come back sorted by (sample, pos), as a LazyFrame of the computed result. Works eagerly
    on the sorted rows: regions from the candidate rows only, masking from a per-sample top-k
    threshold; bench/curation_weights.py measures it.
    """
    t = sorted_by_sample_pos(tokens.collect())
    comp, p = pl.col("completion"), pl.col("p")
    t = t.with_columns(
        high=comp & (p >= params.tau_high).fill_null(False),
        low=comp & (p < params.tau_low).fill_null(False),
    )
    cand = t.select(pl.col("c") & pl.col("low")).to_series()
    t = t.with_columns(_region_ids(t["sample"], cand, params.region_gap))
    t = t.with_columns(boiler=comp & ~pl.col("c") & pl.col("high") & pl.col("region_id").is_null())
    t = t.with_columns(_masked(t, params.rho_max))
    return t.with_columns(loss_mask=comp & ~pl.col("masked")).with_columns(
        token_weight=pl.when(pl.col("loss_mask"))
        .then(pl.when(pl.col("c") & pl.col("high")).then(params.alpha).otherwise(1.0))
        .otherwise(0.0)
        .cast(pl.Float32)
    ).lazy()


def sample_weights(tokens: pl.LazyFrame, params: CusetParams) -> pl.LazyFrame:
    """Per sample: T (completion tokens), R (region share), share_high, mask_share and sample_weight."""
    per = tokens.group_by("sample").agg(
        T=_count(pl.col("completion")),
        in_region=pl.when("completion").then("region_id").count(),
        n_high=_count(pl.col("high")),
        n_masked=_count(pl.col("masked")),
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
