"""The HTML heat map of curated samples: the token classes CuSeT makes stand apart, the weight sets the depth."""

from __future__ import annotations

import re

import polars as pl

from kernelwright.curation.heatmap import HUES, token_colour, weight_heatmap_html

TEXT = {0: "<p>", 1: "import torch\n", 2: "__syncthreads", 3: "();", 4: "x", 5: "y", 6: "z"}
SPAN = re.compile(r'<span[^>]*style="background:([^"]+)"[^>]*>([^<]*)</span>')


def _frame(sample_weight: float) -> pl.DataFrame:
    """One sample: a masked token, a region token, a CUDA-critical token outside the region, two kept
    tokens of weight 1 and one of weight 2 (alpha), all at `sample_weight`."""
    return pl.DataFrame([{
        "id": "seed/x", "prompt_len": 1, "input_ids": [0, 1, 2, 3, 4, 5, 6],
        "token_weights": [0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 2.0], "region_id": [None, None, 0, None, None, None, None],
        "sensitive": [False, False, True, True, False, False, False], "sample_weight": sample_weight,
        "mask_share": 0.2, "R": 0.2}])


def _backgrounds(sample_weight: float) -> dict[str, str]:
    page = weight_heatmap_html(_frame(sample_weight), lambda ids: TEXT[ids[0]])
    return {text: colour for colour, text in SPAN.findall(page.split("</table>")[-1])}


def _depth(colour: str) -> int:
    return 3 * 255 - sum(int(colour[i:i + 2], 16) for i in (1, 3, 5))


def test_masked_region_sensitive_and_kept_tokens_differ_at_the_same_weight() -> None:
    bg = _backgrounds(1.0)
    masked, region, sensitive, kept = bg["import torch\n"], bg["__syncthreads"], bg["();"], bg["x"]
    assert len({masked, region, sensitive, kept}) == 4
    assert kept == "#ffffff" and bg["y"] == kept  # weight 1: the baseline, not coloured
    assert bg["z"] != kept  # a kept token that counts twice is


def test_the_depth_follows_the_weight_on_one_scale_for_every_sample() -> None:
    light, heavy = _backgrounds(0.6), _backgrounds(2.5)
    for text in ("__syncthreads", "();", "z"):
        assert _depth(heavy[text]) > _depth(light[text])
    assert heavy["import torch\n"] == light["import torch\n"]  # masked: weight 0 whatever the sample's


def test_the_legend_shows_every_class() -> None:
    legend = weight_heatmap_html(_frame(1.0)).split("</table>")[0]
    for cls in HUES:
        assert token_colour(cls, 0.0 if cls == "masked" else 3.0) in legend


def test_a_soft_masked_token_is_drawn_masked_and_the_legend_names_no_reading() -> None:
    """With mask_floor > 0 a masked token keeps weight mask_floor: its loss_mask (< 1) says it is masked."""
    frame = _frame(1.0).with_columns(token_weights=pl.lit([0.0, 0.25, 1.0, 1.0, 1.0, 1.0, 2.0]),
                                     loss_mask=pl.lit([0.0, 0.25, 1.0, 1.0, 1.0, 1.0, 1.0]))
    page = weight_heatmap_html(frame, lambda ids: TEXT[ids[0]])
    bg = {text: colour for colour, text in SPAN.findall(page.split("</table>")[-1])}
    assert bg["import torch\n"] == token_colour("masked", 0.0) and bg["x"] == "#ffffff"
    legend = page.split("</table>")[0]
    assert "confident" not in legend and "uncertain" not in legend and "mask_floor" in legend
