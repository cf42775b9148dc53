"""The PNG heat map of one curated sample, and the figures that say how much CuSeT acts."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from kernelwright.curation.heatmap import token_colour
from kernelwright.curation.heatmap_png import _cells, weight_heatmap_png
from kernelwright.curation.samples import _spread_stats

ROW = {"id": "seed/x", "prompt_len": 1, "input_ids": [0, 1, 2, 3, 4], "token_weights": [0.0, 0.0, 1.0, 1.0, 1.5],
       "region_id": [None, None, 0, None, None], "sensitive": [False, False, True, True, False],
       "sample_weight": 1.2, "mask_share": 0.25, "R": 0.25}
TEXT = {0: "<p>", 1: "import torch\n", 2: "__syncthreads", 3: "();\n\t", 4: "x"}


def _decode(ids: list[int]) -> str:
    return TEXT[ids[0]]


def test_cells_follow_lines_and_take_the_html_colours() -> None:
    cells = _cells(ROW, _decode, max_lines=10, max_cols=80)
    masked, region, sensitive = token_colour("masked", 0.0), token_colour("region", 1.2), token_colour("sensitive", 1.2)
    assert cells == [(0, 0, "import torch", masked), (1, 0, "__syncthreads", region), (1, 13, "();", sensitive),
                     (2, 0, "    ", sensitive),
                     (2, 4, "x", token_colour("kept", 1.8))]
    assert len({c[3] for c in cells}) == 4


def test_png_is_written(tmp_path: Path) -> None:
    weight_heatmap_png(ROW, _decode, tmp_path / "w.png")
    assert (tmp_path / "w.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_spread_figures() -> None:
    comp = pl.DataFrame({"sample": [0, 0, 0, 1, 1], "region_id": [0, 0, None, 0, 1],
                         "c": [True, True, False, True, False], "high": [False, False, True, True, True],
                         "masked": [False, False, True, False, False]})
    per = pl.DataFrame({"sample_weight": [0.8, 1.2]})
    got = _spread_stats(comp, per)
    assert got["regions"] == 3 and got["high_share"] == 0.6
    assert got["masked_share_of_sensitive"] == 0.0 and got["masked_share_of_other"] == 0.5
    assert abs(got["sample_weight_std"] - 0.2828) < 1e-3
