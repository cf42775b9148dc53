"""CuSeT algebra against values computed by hand (docs/cuset.md), masking the confident boilerplate
(mask_target="confident"): these figures pin that reading's masks. Reading B: test_weights_reading_b.py."""

from __future__ import annotations

import polars as pl
import pytest

from kernelwright.curation.weights import CusetParams, sample_weights, token_weights


def _frame() -> pl.LazyFrame:
    # sample 0: 2 prompt tokens, then 8 completion tokens (pos 2..9)
    p0 = [None, None, 0.95, 0.30, 0.20, 0.99, 0.10, 0.97, 0.92, 0.40]
    c0 = [0, 0, 0, 1, 1, 0, 1, 0, 0, 1]
    # sample 1: 1 prompt token, then 6 completion tokens, two of them sensitive and confident
    p1 = [None, 0.95, 0.99, 0.91, 0.96, 0.93, 0.20]
    c1 = [0, 0, 0, 0, 1, 1, 0]
    rows = []
    for s, (ps, cs) in enumerate([(p0, c0), (p1, c1)]):
        for i, (p, c) in enumerate(zip(ps, cs, strict=True)):
            rows.append({"sample": s, "pos": i, "completion": p is not None, "p": p, "c": bool(c)})
    return pl.LazyFrame(rows)


def test_token_level_values_by_hand() -> None:
    params = CusetParams(alpha=2.0, mask_target="confident")
    t = token_weights(_frame(), params).collect()
    s0 = t.filter(pl.col("sample") == 0)
    # candidates (c and p < 0.5): pos 3, 4, 6, 9. Steps 1, 2, 3 are all <= region_gap + 1 = 3,
    # so one region covering pos 3..9 (7 tokens).
    assert s0["region_id"].to_list() == [None, None, None, 0, 0, 0, 0, 0, 0, 0]
    # boilerplate (not c, high, not in region): only pos 2. share_high = 4/8 -> rho = 0.25,
    # k = floor(0.25 * 1) = 0: nothing masked.
    assert s0["masked"].to_list() == [False] * 10
    # pos 5 (p .99, c=0) and 7, 8 are inside the region: never masked, weight 1.
    assert s0["token_weight"].to_list() == [0, 0, 1, 1, 1, 1, 1, 1, 1, 1]
    s1 = t.filter(pl.col("sample") == 1)
    # high: pos 1..5 (5 of 6) -> rho = 0.5 * 5/6; boilerplate = pos 1, 2, 3 -> k = floor(1.25) = 1.
    # The most confident boilerplate token is pos 2 (p .99): masked.
    assert s1["masked"].to_list() == [False, False, True, False, False, False, False]
    # pos 4, 5: sensitive and high -> alpha = 2; pos 6 low, not sensitive -> 1.
    assert s1["token_weight"].to_list() == [0, 1, 0, 1, 2, 2, 1]
    assert s1["loss_mask"].to_list() == [False, True, False, True, True, True, True]


def test_sample_weights_by_hand() -> None:
    params = CusetParams(mask_target="confident")
    per = sample_weights(token_weights(_frame(), params), params).collect()
    # R_0 = 7/8, R_1 = 0; mean R = 7/16. w_0 = clip(1 + 2, .5, 3) = 3, w_1 = 1; mean 2 -> 1.5, 0.5
    assert per["R"].to_list() == pytest.approx([7 / 8, 0.0])
    assert per["sample_weight"].to_list() == pytest.approx([1.5, 0.5])
    assert per["mask_share"].to_list() == pytest.approx([0.0, 1 / 6])


def test_no_regions_gives_unit_sample_weights() -> None:
    rows = [{"sample": s, "pos": i, "completion": i > 0, "p": 0.99 if i else None, "c": False}
            for s in range(3) for i in range(4)]
    params = CusetParams(mask_target="confident")
    per = sample_weights(token_weights(pl.LazyFrame(rows), params), params).collect()
    assert per["sample_weight"].to_list() == [1.0, 1.0, 1.0]


def test_region_gap_splits_runs() -> None:
    # candidates at pos 1 and 5: step 4 > gap + 1 = 3 -> two regions, gap tokens outside
    ps = [None, 0.1, 0.9, 0.9, 0.9, 0.1]
    rows = [{"sample": 0, "pos": i, "completion": p is not None, "p": p, "c": i in (1, 5)} for i, p in enumerate(ps)]
    t = token_weights(pl.LazyFrame(rows), CusetParams(mask_target="confident")).collect()
    assert t["region_id"].to_list() == [None, 0, None, None, None, 1]


def test_ties_at_the_masking_threshold_go_to_the_earlier_tokens() -> None:
    # all boilerplate (c = 0, p >= 0.9): share_high = 1, k = floor(0.5 * 1 * 4) = 2 per sample.
    # sample 0: four equal p -> the first two; sample 1: 0.99 and then the first of three 0.95s
    ps = {0: [None, 0.95, 0.95, 0.95, 0.95], 1: [None, 0.95, 0.99, 0.95, 0.95]}
    rows = [{"sample": s, "pos": i, "completion": p is not None, "p": p, "c": False}
            for s, col in ps.items() for i, p in enumerate(col)]
    t = token_weights(pl.LazyFrame(rows), CusetParams(mask_target="confident")).collect()
    assert t.filter(pl.col("sample") == 0)["masked"].to_list() == [False, True, True, False, False]
    assert t.filter(pl.col("sample") == 1)["masked"].to_list() == [False, True, True, False, False]


def test_ties_in_one_sample_leave_the_others_alone() -> None:
    # k = 2 per sample. sample 0 ties at its threshold 0.95 (keep the first two); sample 1 has none
    # (0.99 and 0.97 masked); sample 2 ties above as well (0.99, then the first 0.95)
    ps = {0: [None, 0.95, 0.95, 0.95, 0.95], 1: [None, 0.91, 0.99, 0.93, 0.97],
          2: [None, 0.95, 0.95, 0.99, 0.92]}
    rows = [{"sample": s, "pos": i, "completion": p is not None, "p": p, "c": False}
            for s, col in ps.items() for i, p in enumerate(col)]
    t = token_weights(pl.LazyFrame(rows), CusetParams(mask_target="confident"), in_order=True).collect()
    assert t.filter(pl.col("sample") == 0)["masked"].to_list() == [False, True, True, False, False]
    assert t.filter(pl.col("sample") == 1)["masked"].to_list() == [False, False, True, False, True]
    assert t.filter(pl.col("sample") == 2)["masked"].to_list() == [False, True, False, True, False]
