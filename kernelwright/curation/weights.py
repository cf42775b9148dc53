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
  boiler (the tokens the mask may take) = not c, not in a region, and
    mask_target "uncertain" (reading B, the default): low, and free (a first-use name or a
           number: curation/free_choices.py; `mask_fixed` lifts this); the
           k_s = floor(rho_max * share_s * n_boiler_s) LEAST confident are masked,
           share_s = (tokens with low and not c) / T_s
    mask_target "confident" (reading A): high; the
           k_s = floor(rho_max * share_s * n_boiler_s) MOST confident are masked, share_s = mean(high)
    (equal p: the earlier token first)
  m_t = 0 for prompt tokens, mask_floor for masked tokens (0: a hard mask), else 1  (loss_mask)
  a_t = alpha if c and high, else 1;  token_weight = m_t * a_t
  (masked tokens are never sensitive, so their a_t is 1 and their token weight is mask_floor)
  w_s = clip(1 + lambda * R_s / mean(R), w_min, w_max) / mean(...)   (all 1 if mean(R) == 0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import polars as pl

from kernelwright.errors import UsageError

MaskTarget = Literal["uncertain", "confident"]
MASK_TARGETS: tuple[str, ...] = get_args(MaskTarget)


@dataclass(frozen=True)
class CusetParams:
    """The CuSeT constants, with the defaults of docs/cuset.md.

    `mask_target`: which non-sensitive tokens outside regions the mask takes, "uncertain" (p < tau_low,
    least confident first: reading B) or "confident" (p >= tau_high, most confident first: reading A).
    `mask_floor`: the weight m_t a masked token keeps (0: a hard mask).
    `mask_fixed`: under "uncertain", whether the mask may take tokens that are no free choice (not `free`,
    see curation/free_choices.py: syntax, whitespace, a name's later use); off (the default), they stay in the loss.
    """

    tau_high: float = 0.9
    tau_low: float = 0.5
    region_gap: int = 2
    rho_max: float = 0.5
    alpha: float = 1.0
    lam: float = 1.0
    w_min: float = 0.5
    w_max: float = 3.0
    mask_target: MaskTarget = "uncertain"
    mask_floor: float = 0.0
    mask_fixed: bool = False

    def __post_init__(self) -> None:
        if self.mask_target not in MASK_TARGETS:
            raise UsageError(f"mask_target must be one of {', '.join(MASK_TARGETS)}, not {self.mask_target!r}")
        if not 0.0 <= self.mask_floor <= 1.0:
            raise UsageError(f"mask_floor is the weight a masked token keeps, in [0, 1], not {self.mask_floor}")


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


def _masked(t: pl.DataFrame, rho_max: float, share: pl.Expr, least_confident: bool) -> pl.Series:
    """masked per row (rows sorted by sample): the k_s boilerplate tokens of each sample first in line.

    k_s = floor(rho_max * share_s * n_boiler_s); first in line are the most confident tokens, or the least
    confident ones with `least_confident`. Rather than ranking the boilerplate tokens (a sort per
    sample), take the smallest of each sample's k_s largest keys (key = p, or -p), thr_s (a top-k
    selection): the tokens at or above thr_s are masked. Where that is more than k_s tokens, several
    share thr_s, and of those only the earliest k_s - (number above thr_s) are.
    """
    n_boiler = _count(pl.col("boiler"))
    share = share / _count(pl.col("completion")).clip(lower_bound=1)
    per = t.group_by("sample", maintain_order=True).agg(
        _k=pl.min_horizontal((rho_max * share * n_boiler).floor(), n_boiler).cast(pl.UInt32))
    key = -pl.col("p") if least_confident else pl.col("p")
    b = (
        t.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_g"), "sample", key.alias("_key"), "boiler")
        .filter("boiler").join_asof(per, on="sample")
    )
    p, at = pl.col("_key"), pl.col("_thr")
    thr = p.top_k(pl.col("_k").first()).min().over("sample")  # k_s = 0: null, nothing masked
    hit = b.with_columns(_thr=thr).filter(p >= at)
    if hit.height > per["_k"].sum():  # ties at some thr_s
        room = pl.col("_k").cast(pl.Int64) - (p > at).sum().over("sample")
        hit = hit.filter((p > at) | ((p == at).cum_sum().over("sample") <= room))
    return pl.Series("masked", [], dtype=pl.Boolean).extend_constant(False, t.height).scatter(hit["_g"], True)


def token_weights(tokens: pl.LazyFrame, params: CusetParams, *, in_order: bool = False) -> pl.LazyFrame:
    """Add high, low, region_id, boiler, masked, loss_mask (m_t) and token_weight (m_t * a_t) per token.

    `boiler` marks the tokens the mask may take (non-sensitive, outside every region; low confidence
    under mask_target "uncertain", high under "confident"); loss_mask is m_t as Float32 (1 kept,
    mask_floor masked, 0 on the prompt).

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
    free = ~c & pl.col("region_id").is_null()  # never a sensitive token, never one inside a region
    if params.mask_target == "confident":
        t = t.with_columns(boiler=high & free)
        masked = _masked(t, params.rho_max, _count(high), least_confident=False)
    else:
        choice = pl.col("free") if "free" in t.columns else pl.lit(True)  # frames made without it: all free
        guard = pl.lit(True) if params.mask_fixed else choice  # syntax and a name's later uses are not choices
        t = t.with_columns(boiler=pl.col("low") & free & guard)
        masked = _masked(t, params.rho_max, _count(pl.col("low") & ~c), least_confident=True)
    zero, one, alpha, floor = (pl.lit(x, dtype=pl.Float32) for x in (0.0, 1.0, params.alpha, params.mask_floor))
    hit = pl.lit(masked)
    m = pl.when(comp & ~hit).then(one).when(hit).then(floor).otherwise(zero)  # no cast pass
    a = pl.when(c & high).then(alpha).otherwise(one)
    return t.with_columns(masked, loss_mask=m, token_weight=m * a).lazy()  # evaluated side by side


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
