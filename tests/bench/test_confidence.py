"""The copying figures of the base-confidence sweep (bench/base_confidence_sweep.py) on a hand-made
curated sample: which tokens a copier gets right, and the masked share if the base were sure of them."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "bench"))
sweep = importlib.import_module("base_confidence_sweep")

#      prompt | 1 2 3 4 5 6, then the same run again, then 7
IDS = [9, 8, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6, 7]
P = [0.0, 0.0] + [0.95] * 10 + [0.2] * 3


def test_only_a_token_whose_five_predecessors_were_followed_by_it_before_is_copied() -> None:
    flags = sweep._copied_flags(IDS, start=2)
    assert [i for i, f in enumerate(flags) if f] == [13]  # 1 2 3 4 5 -> 6 again; 2 3 4 5 6 was followed by 1
    assert sweep._copyable(IDS, P, start=2) == (10, 2, 0)  # scored, copyable, confident


def test_masked_share_if_the_base_were_sure_of_the_copied_tokens(tmp_path: Path) -> None:
    pl.DataFrame({"input_ids": [IDS], "p": [P], "sensitive": [[False] * len(IDS)], "prompt_len": [2]}).write_parquet(
        tmp_path / "data.parquet")
    (tmp_path / "report.json").write_text(json.dumps({"stats": {}}))
    # as scored: 10 of 13 completion tokens confident, floor(0.5 * 10/13 * 10) = 3 masked; with token 13
    # sure as well: floor(0.5 * 11/13 * 11) = 4
    figures = sweep.confidence_figures(tmp_path)
    assert figures["masked_share_if_copying"] == pytest.approx(4 / 13)
    assert figures["copy_oracle_share"] == pytest.approx(1 / 10)  # of the 10 tokens scored
