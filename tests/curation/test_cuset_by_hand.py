"""Two hand-made samples through the whole Polars CuSeT stage; every derived value worked out by hand.

    .venv/bin/python -m pytest tests/curation/test_cuset_by_hand.py

spans -> c_t and kind (mark_sensitive) -> high, low, regions, boilerplate, masks m_t, token
weights m_t * a_t (token_weights) -> T, R, share_high, mask_share, w_s (sample_weights), with
tau_high 0.9, tau_low 0.5, region_gap 2, rho_max 0.5, alpha 2, lambda 1, and a clip [1.8, 2.0]
chosen so that both ends bind, masking the confident boilerplate (mask_target "confident").
"""

from __future__ import annotations

import polars as pl
import pytest

from kernelwright.curation.sensitive import mark_sensitive
from kernelwright.curation.weights import CusetParams, sample_weights, token_weights

PARAMS = CusetParams(tau_high=0.9, tau_low=0.5, region_gap=2, rho_max=0.5, alpha=2.0, lam=1.0, w_min=1.8, w_max=2.0,
                     mask_target="confident")

# sample 0: prompt pos 0-1; completion pos 2-11, 2 characters a token: pos i covers [2(i-2), 2(i-2)+2)
P0 = [None, None, 0.95, 0.97, 0.30, 0.96, 0.20, 0.99, 0.60, 0.98, 0.10, 0.92]
# sample 1: prompt pos 0; completion pos 1-5, 3 characters a token: pos i covers [3(i-1), 3(i-1)+3)
P1 = [None, 0.91, 0.95, 0.93, 0.40, 0.97]
SPANS = [
    (0, 4, 9, "barrier"),  # overlaps [4,6) [6,8) [8,10): pos 4, 5, 6
    (0, 6, 7, "thread_index"),  # inside the barrier span, shorter: pos 5 takes this kind
    (0, 17, 20, "atomic"),  # [16,18) [18,20): pos 10, 11
    (1, 9, 11, "bounds_guard"),  # [9,12): pos 4
]


def _tokens() -> pl.DataFrame:
    rows = []
    for s, (ps, width) in enumerate([(P0, 2), (P1, 3)]):
        n_prompt = sum(p is None for p in ps)
        for i, p in enumerate(ps):
            k = i - n_prompt
            rows.append({"sample": s, "pos": i, "completion": p is not None, "p": p,
                         "tok_start": k * width if k >= 0 else None, "tok_end": k * width + width if k >= 0 else None})
    return pl.DataFrame(rows)


def _spans() -> pl.DataFrame:
    return pl.DataFrame(SPANS, schema=["sample", "s_start", "s_end", "kind"], orient="row")


def _stage() -> tuple[pl.DataFrame, pl.DataFrame]:
    tokens = token_weights(mark_sensitive(_tokens().lazy(), _spans().lazy()), PARAMS).collect()
    return tokens, sample_weights(tokens.lazy(), PARAMS).collect()


def _col(frame: pl.DataFrame, sample: int, name: str) -> list:
    return frame.filter(pl.col("sample") == sample)[name].to_list()


F, T = False, True


def test_sample_0_every_token_value() -> None:
    t, _ = _stage()
    #                                   pos: 0  1  2  3  4  5  6  7  8  9  10 11
    assert _col(t, 0, "c") == [F, F, F, F, T, T, T, F, F, F, T, T]
    assert _col(t, 0, "span_kind") == [None] * 4 + ["barrier", "thread_index", "barrier"] + [None] * 3 + ["atomic"] * 2
    # high: p >= 0.9 at pos 2, 3, 5, 7, 9, 11 (6 of T=10); low: p < 0.5 at pos 4, 6, 10; pos 8 (0.6) neither
    assert _col(t, 0, "high") == [F, F, T, T, F, T, F, T, F, T, F, T]
    assert _col(t, 0, "low") == [F, F, F, F, T, F, T, F, F, F, T, F]
    # candidates (c and low): pos 4, 6, 10. 4 -> 6 is 2 steps <= gap + 1 = 3: one region, pos 4-6
    # (pos 5 in it although confident); 6 -> 10 is 4 steps > 3: a second region, pos 10 alone
    assert _col(t, 0, "region_id") == [None] * 4 + [0, 0, 0] + [None] * 3 + [1, None]
    # boilerplate (not c, high, outside regions): pos 2, 3, 7, 9 -> 4 tokens;
    # k = floor(rho_max * share_high * n_boiler) = floor(0.5 * 0.6 * 4) = floor(1.2) = 1:
    # the most confident of them, pos 7 (p 0.99), is masked
    assert _col(t, 0, "boiler") == [F, F, T, T, F, F, F, T, F, T, F, F]
    assert _col(t, 0, "masked") == [F, F, F, F, F, F, F, T, F, F, F, F]
    # m_t: completion and not masked
    assert _col(t, 0, "loss_mask") == [F, F, T, T, T, T, T, F, T, T, T, T]
    # a_t = alpha = 2 where c and high (pos 5, 11), else 1; token_weight = m_t * a_t
    assert _col(t, 0, "token_weight") == [0, 0, 1, 1, 1, 2, 1, 0, 1, 1, 1, 2]


def test_sample_1_every_token_value() -> None:
    t, _ = _stage()
    #                                   pos: 0  1  2  3  4  5
    assert _col(t, 1, "c") == [F, F, F, F, T, F]
    assert _col(t, 1, "span_kind") == [None, None, None, None, "bounds_guard", None]
    assert _col(t, 1, "high") == [F, T, T, T, F, T]  # 4 of T=5: share_high 0.8
    assert _col(t, 1, "low") == [F, F, F, F, T, F]
    assert _col(t, 1, "region_id") == [None, None, None, None, 0, None]  # ids restart at 0 per sample
    # boilerplate pos 1, 2, 3, 5; k = floor(0.5 * 0.8 * 4) = floor(1.6) = 1: pos 5 (p 0.97)
    assert _col(t, 1, "boiler") == [F, T, T, T, F, T]
    assert _col(t, 1, "masked") == [F, F, F, F, F, T]
    assert _col(t, 1, "loss_mask") == [F, T, T, T, T, F]
    assert _col(t, 1, "token_weight") == [0, 1, 1, 1, 1, 0]  # pos 4 is c but low: weight 1


def test_sample_values() -> None:
    _, per = _stage()
    assert per["T"].to_list() == [10, 5]
    # R_0 = 4 region tokens (pos 4, 5, 6, 10) / 10 = 0.4; R_1 = 1 / 5 = 0.2; mean R = 0.3
    assert per["R"].to_list() == pytest.approx([0.4, 0.2], abs=1e-12)
    assert per["share_high"].to_list() == pytest.approx([0.6, 0.8], abs=1e-12)
    assert per["mask_share"].to_list() == pytest.approx([0.1, 0.2], abs=1e-12)
    # 1 + lambda * R / mean R = 1 + 0.4/0.3 = 2.333 -> clipped to w_max 2.0;
    #                           1 + 0.2/0.3 = 1.667 -> clipped to w_min 1.8;
    # renormalised by their mean 1.9: 2.0/1.9 = 1.0526..., 1.8/1.9 = 0.9473...
    assert per["sample_weight"].to_list() == pytest.approx([2.0 / 1.9, 1.8 / 1.9], abs=1e-6)  # float32
    assert per["sample_weight"].mean() == pytest.approx(1.0, abs=1e-6)


def test_row_order_of_the_input_does_not_matter() -> None:
    t, per = _stage()
    shuffled = _tokens().sample(fraction=1.0, shuffle=True, seed=3)
    t2 = token_weights(mark_sensitive(shuffled.lazy(), _spans().sample(fraction=1.0, shuffle=True, seed=4).lazy()),
                       PARAMS).collect()
    assert t2.select(t.columns).equals(t)
    assert sample_weights(t2.lazy(), PARAMS).collect().equals(per)


def test_identical_spans_take_the_first_kind_name() -> None:
    spans = pl.DataFrame([(0, 4, 9, "shared_decl"), (0, 4, 9, "barrier")],
                         schema=["sample", "s_start", "s_end", "kind"], orient="row")
    t = mark_sensitive(_tokens().lazy(), spans.lazy()).collect()
    assert _col(t, 0, "span_kind") == [None] * 4 + ["barrier"] * 3 + [None] * 5
