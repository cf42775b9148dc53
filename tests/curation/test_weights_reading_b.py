"""Reading B of CuSeT (mask_target="uncertain"): the mask takes the least confident NON-sensitive tokens
outside every low-confidence sensitive region, and keeps every confident token; the soft mask_floor;
and reading A (mask_target="confident") against the same plain-Python algebra (docs/cuset.md).

    .venv/bin/pytest -q tests/curation/test_weights_reading_b.py
"""

from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np
import polars as pl
import pytest

from kernelwright.config import config_to_params, parse_config
from kernelwright.curation.config import CurateConfig
from kernelwright.curation.weights import CusetParams, sample_weights, token_weights
from kernelwright.errors import UsageError

B = CusetParams(rho_max=1.0, alpha=2.0)  # the default mask_target, "uncertain"
A = CusetParams(rho_max=1.0, alpha=2.0, mask_target="confident")

# (p, c) per completion token; every sample has one prompt token (pos 0) in front
S0 = [(0.10, 0), (0.95, 0), (0.20, 1), (0.05, 0), (0.30, 1), (0.40, 0), (0.97, 1), (0.15, 0), (0.99, 0),
      (0.45, 0), (0.02, 1), (0.25, 0)]
S1 = [(0.99, 0), (0.20, 0), (0.30, 0), (0.97, 0), (0.96, 0), (0.10, 0), (0.40, 0), (0.93, 0)]
S2 = [(0.30, 0), (0.20, 0), (0.30, 0), (0.30, 0), (0.20, 0), (0.95, 0)]


def _frame(*samples: list[tuple[float, int]]) -> pl.LazyFrame:
    rows: list[dict[str, object]] = []
    for s, toks in enumerate(samples):
        rows.append({"sample": s, "pos": 0, "completion": False, "p": None, "c": False})
        rows += [{"sample": s, "pos": i + 1, "completion": True, "p": p, "c": bool(c)} for i, (p, c) in enumerate(toks)]
    return pl.LazyFrame(rows, schema={"sample": pl.Int64, "pos": pl.Int64, "completion": pl.Boolean, "p": pl.Float64,
                                      "c": pl.Boolean})


def _masked_pos(t: pl.DataFrame, sample: int) -> list[int]:
    return t.filter(pl.col("sample") == sample, pl.col("masked"))["pos"].to_list()


def test_reading_b_masks_the_least_confident_non_sensitive_tokens_by_hand() -> None:
    t = token_weights(_frame(S0, S1), B).collect()
    s0 = t.filter(pl.col("sample") == 0)
    # regions: c & low at pos 3, 5, 11; 3 -> 5 merge (step 2 <= gap + 1), 11 alone: pos 3..5 and 11
    assert s0["region_id"].to_list() == [None, None, None, 0, 0, 0, None, None, None, None, None, 1, None]
    # low and not c: pos 1, 4, 6, 8, 10, 12 -> share 6/12; candidates (outside regions): 1, 6, 8, 10, 12;
    # k = floor(1.0 * 0.5 * 5) = 2: the two least confident, pos 1 (.10) and 8 (.15). Not pos 4 (.05: inside
    # a region) nor pos 11 (.02: sensitive), though both are less confident still.
    assert _masked_pos(t, 0) == [1, 8]
    # confident boilerplate (pos 2, 9) kept at 1; confident sensitive (pos 7) at alpha
    assert s0["token_weight"].to_list() == [0, 0, 1, 1, 1, 1, 1, 2, 0, 1, 1, 1, 1]
    assert s0["loss_mask"].to_list() == [0, 0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1]
    # sample 1, no sensitive token: low at pos 2, 3, 6, 7 -> share 4/8, k = floor(0.5 * 4) = 2: pos 6, 2
    assert _masked_pos(t, 1) == [2, 6]


def test_confident_boilerplate_stays_in_the_loss_which_reading_a_masks() -> None:
    b, a = token_weights(_frame(S1), B).collect(), token_weights(_frame(S1), A).collect()
    # reading A masks the two most confident (pos 1 at .99, pos 4 at .97); B keeps both at weight 1
    assert _masked_pos(a, 0) == [1, 4]
    for pos in (1, 4, 5, 8):  # every confident token of the sample
        assert b.filter(pl.col("pos") == pos)["token_weight"].item() == 1.0
        assert not b.filter(pl.col("pos") == pos)["masked"].item()


def test_ties_go_to_the_earlier_tokens_and_k_adapts_to_the_sample() -> None:
    t = token_weights(_frame(S2), B).collect()
    # low and not c: pos 1-5 -> share 5/6, k = floor(5/6 * 5) = 4: both .20s (pos 2, 5), then the
    # earliest two of the three .30s (pos 1, 3)
    assert _masked_pos(t, 0) == [1, 2, 3, 5]
    half = token_weights(_frame(S2), CusetParams(rho_max=0.5)).collect()
    assert _masked_pos(half, 0) == [2, 5]  # k = floor(0.5 * 5/6 * 5) = 2


def test_no_low_confidence_boilerplate_means_no_mask() -> None:
    confident = [(0.95, 0), (0.99, 0), (0.20, 1), (0.92, 1)]
    t = token_weights(_frame(confident), CusetParams(rho_max=1.0)).collect()
    assert not t["masked"].any()
    assert t["token_weight"].to_list() == [0, 1, 1, 1, 1]


def test_soft_floor_weighs_exactly_the_masked_tokens() -> None:
    hard = token_weights(_frame(S0, S1, S2), B).collect()
    soft = token_weights(_frame(S0, S1, S2), CusetParams(rho_max=1.0, alpha=2.0, mask_floor=0.25)).collect()
    assert soft["masked"].equals(hard["masked"]) and hard["masked"].sum() == 8
    masked = soft["masked"]
    assert (soft.filter(masked)["token_weight"] == 0.25).all() and (soft.filter(masked)["loss_mask"] == 0.25).all()
    assert soft.filter(~masked)["token_weight"].equals(hard.filter(~masked)["token_weight"])
    assert soft.filter(~masked)["loss_mask"].equals(hard.filter(~masked)["loss_mask"])
    assert (hard.filter(masked)["token_weight"] == 0).all()


def test_the_sample_weight_does_not_depend_on_the_reading() -> None:
    frame = _frame(S0, S1, S2)
    got = {prm.mask_target: sample_weights(token_weights(frame, prm), prm).collect() for prm in (A, B)}
    assert got["uncertain"]["sample_weight"].equals(got["confident"]["sample_weight"])
    assert got["uncertain"]["R"].to_list() == pytest.approx([4 / 12, 0.0, 0.0])
    assert got["uncertain"]["mask_share"].to_list() == pytest.approx([2 / 12, 2 / 8, 4 / 6])


def _regions(ps: list[float], cs: list[bool], prm: CusetParams) -> set[int]:
    cand = [i for i, (p, c) in enumerate(zip(ps, cs, strict=True)) if c and p < prm.tau_low]
    inside: set[int] = set()
    for j, i in enumerate(cand):
        if j and i - cand[j - 1] <= prm.region_gap + 1:
            inside.update(range(cand[j - 1], i + 1))
        inside.add(i)
    return inside


def _reference(frame: pl.DataFrame, prm: CusetParams) -> tuple[list[bool], list[float], list[float]]:
    """masked, loss_mask and token_weight per completion token, one sample at a time, in plain Python."""
    masked, mask, weight = [], [], []
    for _, g in frame.filter("completion").sort("sample", "pos").group_by("sample", maintain_order=True):
        ps, cs = g["p"].to_list(), g["c"].to_list()
        inside = _regions(ps, cs, prm)
        if prm.mask_target == "confident":
            cand = [i for i, (p, c) in enumerate(zip(ps, cs, strict=True))
                    if not c and p >= prm.tau_high and i not in inside]
            share = sum(p >= prm.tau_high for p in ps) / len(ps)
            order = sorted(cand, key=lambda i: (-ps[i], i))
        else:
            cand = [i for i, (p, c) in enumerate(zip(ps, cs, strict=True))
                    if not c and p < prm.tau_low and i not in inside]
            share = sum(p < prm.tau_low and not c for p, c in zip(ps, cs, strict=True)) / len(ps)
            order = sorted(cand, key=lambda i: (ps[i], i))
        k = min(math.floor(prm.rho_max * share * len(cand)), len(cand))
        hit = set(order[:k])
        for i, (p, c) in enumerate(zip(ps, cs, strict=True)):
            m = prm.mask_floor if i in hit else 1.0
            masked.append(i in hit)
            mask.append(m)
            weight.append(m * (prm.alpha if c and p >= prm.tau_high else 1.0))
    return masked, mask, weight


def _random_frame(seed: int, n_samples: int = 60) -> pl.DataFrame:
    """Samples of 4-80 completion tokens, p on a coarse grid (many ties), a third of them sensitive."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, object]] = []
    for s in range(n_samples):
        rows.append({"sample": s, "pos": 0, "completion": False, "p": None, "c": False})
        for i in range(1, int(rng.integers(5, 81))):
            p = float(rng.choice([0.05, 0.1, 0.2, 0.3, 0.45, 0.6, 0.8, 0.92, 0.95, 0.99]))
            rows.append({"sample": s, "pos": i, "completion": True, "p": p, "c": bool(rng.random() < 0.3)})
    return pl.DataFrame(rows, schema={"sample": pl.Int64, "pos": pl.Int64, "completion": pl.Boolean,
                                      "p": pl.Float64, "c": pl.Boolean})


@pytest.mark.parametrize("target", ["uncertain", "confident"])
@pytest.mark.parametrize(("rho_max", "floor", "gap"), [(0.5, 0.0, 2), (1.0, 0.2, 0), (2.0, 0.0, 3)])
def test_both_readings_match_the_plain_python_algebra(target: str, rho_max: float, floor: float, gap: int) -> None:
    """mask_target="confident" is reading A as it was (the regression); "uncertain" is reading B."""
    frame = _random_frame(seed=int(rho_max * 10) + gap)
    prm = CusetParams(rho_max=rho_max, alpha=1.5, region_gap=gap, mask_target=target,  # type: ignore[arg-type]
                      mask_floor=floor)
    got = token_weights(frame.lazy(), prm).collect().filter("completion")
    masked, mask, weight = _reference(frame, prm)
    assert got["masked"].to_list() == masked and sum(masked) > 20
    assert got["loss_mask"].to_list() == pytest.approx(mask)
    assert got["token_weight"].to_list() == pytest.approx(weight)


def test_reading_b_never_masks_a_sensitive_token_or_one_inside_a_region() -> None:
    frame = _random_frame(seed=7, n_samples=120)
    t = token_weights(frame.lazy(), CusetParams(rho_max=5.0)).collect().filter("completion")
    hit = t.filter("masked")
    assert hit.height > 100
    assert not hit["c"].any() and hit["region_id"].is_null().all() and (hit["p"] < 0.5).all()
    assert t.filter(pl.col("p") >= 0.5)["loss_mask"].min() == 1.0  # every confident token stays whole
    # the least confident go first: in each sample no candidate left in is less confident than one masked
    free = t.filter(~pl.col("c"), pl.col("region_id").is_null(), pl.col("p") < 0.5)
    per = free.group_by("sample").agg(top_masked=pl.col("p").filter("masked").max(),
                                      least_kept=pl.col("p").filter(~pl.col("masked")).min())
    assert (per.drop_nulls()["top_masked"] <= per.drop_nulls()["least_kept"]).all()
    assert per["top_masked"].null_count() < per.height and per["least_kept"].null_count() < per.height


def test_config_defaults_flags_and_bad_values() -> None:
    cfg = parse_config(CurateConfig, [], "curate")
    assert (cfg.mask_target, cfg.mask_floor) == ("uncertain", 0.0)
    assert CusetParams().mask_target == "uncertain" and CusetParams().mask_floor == 0.0
    cfg = parse_config(CurateConfig, ["--mask-target", "confident", "--mask-floor", "0.2"], "curate")
    assert (cfg.cuset().mask_target, cfg.cuset().mask_floor) == ("confident", 0.2)
    with pytest.raises(UsageError, match="mask_floor"):
        parse_config(CurateConfig, ["--mask-floor", "1.5"], "curate")
    with pytest.raises(UsageError, match="mask_target"):
        CusetParams(mask_target="boilerplate")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="mask_floor"):
        CusetParams(mask_floor=-0.1)


def test_the_new_constants_reach_cuset_json_and_the_mlflow_params() -> None:
    cfg = CurateConfig(mask_target="confident", mask_floor=0.1)
    assert {"mask_target": "confident", "mask_floor": 0.1}.items() <= asdict(cfg.cuset()).items()  # cuset.json
    params = config_to_params(cfg, "curate.")
    assert (params["curate.mask_target"], params["curate.mask_floor"]) == ("confident", "0.1")


def test_reading_b_masks_only_free_choices_unless_asked() -> None:
    """S1 again, with its two least confident tokens (pos 6 and 2) marked as no free choice (syntax, or a name
    used before): the mask passes over them to the next least confident; with mask_fixed it takes them."""
    fixed = {2, 6}
    frame = _frame(S1).with_columns(free=~pl.col("pos").is_in(list(fixed)))
    guarded = token_weights(frame, B).collect()
    # low and not c: pos 2, 3, 6, 7 -> share 4/8; candidates that are free: 3, 7 -> k = floor(0.5 * 2) = 1
    assert _masked_pos(guarded, 0) == [3]
    lifted = token_weights(frame, CusetParams(rho_max=1.0, alpha=2.0, mask_fixed=True)).collect()
    assert _masked_pos(lifted, 0) == [2, 6]
    # reading A is untouched by the guard: it takes confident tokens, never low-confidence ones
    assert _masked_pos(token_weights(frame, A).collect(), 0) == _masked_pos(token_weights(_frame(S1), A).collect(), 0)
