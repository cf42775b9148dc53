"""The serving benchmark's pure functions (bench/serve_stats.py, bench/serve_throughput.py): percentiles,
level summaries, the ratio table, the concurrency option."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT / "bench"))  # the benchmark's modules import each other by name, as when it is run
st = importlib.import_module("serve_stats")
cli = importlib.import_module("serve_throughput")


def test_percentile_interpolates_between_closest_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert st.percentile(values, 0) == 1.0 and st.percentile(values, 100) == 4.0
    assert st.percentile(values, 50) == pytest.approx(2.5)
    assert st.percentile(values, 99) == pytest.approx(3.97)
    assert st.percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        st.percentile([], 50)
    with pytest.raises(ValueError):
        st.percentile([1.0], 101)


def test_summarize_counts_only_answered_requests() -> None:
    stats = st.summarize([0.1, 0.2, 0.3, 0.4], wall_s=2.0, errors=1)
    assert stats["requests"] == 5 and stats["ok"] == 4 and stats["errors"] == 1
    assert stats["rps"] == 2.0 and stats["p50_s"] == 0.25 and stats["mean_s"] == 0.25
    empty = st.summarize([], wall_s=1.0, errors=3)
    assert empty["rps"] is None and empty["p50_s"] is None and empty["p99_s"] is None


def test_ratio_rows_and_table_leave_missing_baselines_blank() -> None:
    levels = {
        st.KW_ON: {1: st.summarize([0.5, 0.5], 1.0), 32: st.summarize([1.0] * 8, 2.0)},
        st.KW_OFF: {1: st.summarize([0.5, 0.5], 0.5)},
        st.MLFLOW: {1: st.summarize([1.0], 1.0), 32: st.summarize([2.0] * 4, 4.0)},
    }
    rows = st.ratio_rows(levels, [1, 32])
    assert [r["concurrency"] for r in rows] == [1, 32]
    assert rows[0][f"{st.KW_ON}/{st.MLFLOW}"] == 2.0 and rows[0][f"{st.KW_OFF}/{st.MLFLOW}"] == 4.0
    assert rows[1][f"{st.KW_ON}/{st.MLFLOW}"] == 4.0 and rows[1][f"{st.KW_OFF}/{st.MLFLOW}"] is None
    assert rows[0][f"{st.KW_ON}/{st.TF_SERVE}"] is None and rows[0][f"{st.TF_SERVE}_rps"] is None
    table = st.format_table(rows, levels).splitlines()
    assert len(table) == 3 and "kw(on)/mlflow" in table[0]
    assert "2.00x" in table[1] and "4.00x" in table[2] and table[2].split()[-1] == "-"
    assert st.ratio(1.0, 0.0) is None and st.ratio(None, 1.0) is None and st.ratio(3.0, 2.0) == 1.5


def test_request_counts_and_concurrency_parsing() -> None:
    assert st.requests_for(1, None) == 32 and st.requests_for(32, None) == 64 and st.requests_for(8, 5) == 5
    assert cli.parse_concurrency("1, 8,32") == [1, 8, 32]
    with pytest.raises(argparse.ArgumentTypeError):
        cli.parse_concurrency("0,8")
