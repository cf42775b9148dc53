"""CuSeT token and sample weights from p_t and c_t, in Polars (docs/cuset.md).

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
    """The CuSeT constants, with the defaults of docs/cuset.md."""

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


def sorted_by_sample_pos(frame: pl.DataFrame, *, in_order: bool = False) -> pl.DataFrame:
    """`frame` sorted by (sample, pos) with `sample` flagged sorted; not re-sorted when it already is.

    The check is one sortedness test of the key sample * KEY_BASE + pos (three passes over a
    column); a two-column sort of 1M rows costs several times that. `in_order`: the caller built
    the rows in that order, so they are not checked either.
    """
    if not in_order and frame.height > 1 and not frame.select(sample_key(pl.col("pos"))).to_series().is_sorted():
        frame = frame.sort("sample", "pos")
    return frame.with_columns(pl.col("sample").set_sorted())


def _count(flag: pl.Expr) -> pl.Expr:
    """A boolean's sum as a count of non-nulls: the same number, on a faster group-by path."""
    return pl.when(flag).then(True).count()


def _region_ids(t: pl.DataFrame, gap: int) -> pl.Series:
    """region_id per row of `t` (sorted by (sample, pos)), worked out on the candidate rows alone.

    A candidate opens a new region unless the previous candidate is in the same sample and at most
    gap + 1 rows back; a region covers every row from its first to its last candidate; ids count
    a sample's regions from 0.
    """
    g, s = pl.col("g"), pl.col("s")
    first = (s != s.shift(1)).fill_null(True)  # the sample's first candidate, or first region
    new = first | (g - g.shift(1) > gap + 1)
    rc = (
        t.select(g=pl.int_range(pl.len(), dtype=pl.UInt32), s="sample", _c=pl.col("c") & pl.col("low"))
        .filter("_c").with_columns(_new=new, _last=new.shift(-1).fill_null(True))
    )
    starts, ends = rc.filter("_new"), rc.filter("_last")
    r = pl.int_range(pl.len(), dtype=pl.Int32)
    rows = pl.DataFrame({"lo": starts["g"], "hi": ends["g"] + 1, "s": starts["s"]}).select(
        g=pl.int_ranges("lo", "hi", dtype=pl.UInt32), id=r - pl.when(first).then(r).forward_fill()
    ).explode("g")
    return pl.Series("region_id", [], dtype=pl.Int32).extend_constant(None, t.height).scatter(rows["g"], rows["id"])


def _masked(t: pl.DataFrame, rho_max: float) -> pl.Series:
    """masked per row (rows sorted by sample): the k_s most confident boilerplate tokens of each sample.

    k_s = floor(rho_max * share_high * n_boiler). Rather than ranking the boilerplate tokens (a sort
    per sample), take the smallest of each sample's k_s largest p, thr_s (a top-k selection): the
    tokens at or above thr_s are masked. Where that is more than k_s tokens, several share thr_s,
    and of those only the earliest k_s - (number above thr_s) are.
    """
    n_boiler = _count(pl.col("boiler"))
    share_high = _count(pl.col("high")) / _count(pl.col("completion")).clip(lower_bound=1)
    per = t.group_by("sample", maintain_order=True).agg(
        _k=pl.min_horizontal((rho_max * share_high * n_boiler).floor(), n_boiler).cast(pl.UInt32))
    b = (
        t.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_g"), "sample", "p", "boiler").filter("boiler")
        .join_asof(per, on="sample")
    )
    p, at = pl.col("p"), pl.col("_thr")
    thr = p.top_k(pl.col("_k").first()).min().over("sample")  # k_s = 0: null, nothing masked
    hit = b.with_columns(_thr=thr).filter(p >= at)
    if hit.height > per["_k"].sum():  # ties at some thr_s
        room = pl.col("_k").cast(pl.Int64) - (p > at).sum().over("sample")
        hit = hit.filter((p > at) | ((p == at).cum_sum().over("sample") <= room))
    return pl.Series("masked", [], dtype=pl.Boolean).extend_constant(False, t.height).scatter(hit["_g"], True)


def token_weights(tokens: pl.LazyFrame, params: CusetParams, *, in_order: bool = False) -> pl.LazyFrame:
    """Add high, low, region_id, boiler, masked, loss_mask (m_t) and token_weight (m_t * a_t) per token.

    Rows come back sorted by (sample, pos), as a LazyFrame of the computed result. `in_order`: the
    rows already come in that order (as `mark_sensitive` hands them on), so they are not checked.
    Works eagerly on the sorted rows: regions from the candidate rows only, masking from a
    per-sample top-k threshold; bench/curation_weights.py measures it.
    """
    t = sorted_by_sample_pos(tokens.collect(), in_order=in_order)
    comp, p, c, high = pl.col("completion"), pl.col("p"), pl.col("c"), pl.col("high")
    t = t.with_columns(
        high=comp & (p >= params.tau_high).fill_null(False), low=comp & (p < params.tau_low).fill_null(False)
    )
    t = t.with_columns(_region_ids(t, params.region_gap))
    t = t.with_columns(boiler=high & ~c & pl.col("region_id").is_null())
    masked = _masked(t, params.rho_max)
    keep = comp & ~pl.lit(masked)
    zero, one, alpha = (pl.lit(x, dtype=pl.Float32) for x in (0.0, 1.0, params.alpha))  # no cast pass
    weight = pl.when(keep).then(pl.when(c & high).then(alpha).otherwise(one)).otherwise(zero)
    return t.with_columns(masked, loss_mask=keep, token_weight=weight).lazy()  # evaluated side by side


def sample_weights(tokens: pl.LazyFrame, params: CusetParams) -> pl.LazyFrame:
    """Per sample: T (completion tokens), R (region share), share_high, mask_share and sample_weight.

    Worked out eagerly and handed back as a LazyFrame of the result: on this plan the lazy
    optimiser's passes cost more than the group-by itself.
    """
    frame = tokens.select("sample", "completion", "region_id", "high", "masked").collect()
    n = pl.col("T").clip(lower_bound=1)
    per = frame.group_by("sample", maintain_order=True).agg(
        T=_count(pl.col("completion")),
        in_region=pl.when("completion").then("region_id").count(),
        n_high=_count(pl.col("high")),
        n_masked=_count(pl.col("masked")),
    ).with_columns(R=pl.col("in_region") / n, share_high=pl.col("n_high") / n, mask_share=pl.col("n_masked") / n)
    mean_r = pl.col("R").mean()
    raw = pl.when(mean_r > 0).then(
        (1.0 + params.lam * pl.col("R") / mean_r).clip(params.w_min, params.w_max)
    ).otherwise(1.0)
    return per.with_columns(sample_weight=(raw / raw.mean()).cast(pl.Float32)).sort("sample").lazy()
