"""The serving benchmark's pure functions (bench/serve_stats.py, bench/serve_throughput.py): percentiles,
level summaries, the ratio table, the concurrency option."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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


launchers = importlib.import_module("serve_launchers")


def _launches() -> list:
    reg = launchers.Registered("models:/kernelwright-coder@champion", "1", Path("/ckpt"), None, 1, 0.0)
    plan = importlib.import_module("serve_load").Plan([1], None, 16, 0, 30.0)
    return launchers.launches(reg, Path("/work"), Path("/tmp"), plan, mlflow_workers=1, cb_num_blocks=128,
                              cb_max_batch_tokens=512)


def test_transformers_serve_is_probed_with_continuous_batching_and_falls_back_without() -> None:
    (tf,) = [launch for launch in _launches() if launch.label == "transformers_serve"]
    assert "--continuous-batching" in tf.argv_for(1) and tf.probe is not None
    assert tf.fallback is not None and "--continuous-batching" not in tf.fallback.argv_for(1)
    assert tf.fallback.names == tf.names == [st.TF_SERVE] and tf.fallback.fallback is None


def test_a_failed_continuous_batching_server_is_recorded_and_the_plain_one_measured(monkeypatch) -> None:
    (tf,) = [launch for launch in _launches() if launch.label == "transformers_serve"]
    ran: list[str] = []

    def run(launch, env, tmp, plan, start_timeout):  # type: ignore[no-untyped-def]
        ran.append(launch.label)
        if launch.label == "transformers_serve":
            return {st.TF_SERVE: {"status": "failed", "reason": "the probe request answered 500"}}
        return {st.TF_SERVE: {"status": "ok", "levels": {}}}

    monkeypatch.setattr(cli, "_run_server", run)
    out = cli._run_with_fallback(tf, {}, Path("/tmp"), None, 1.0)
    assert ran == ["transformers_serve", "transformers_serve_plain"]
    assert out[cli.TF_SERVE_CB] == {"status": "failed", "reason": "the probe request answered 500"}
    assert out[st.TF_SERVE] == {"status": "ok", "levels": {}, "continuous_batching": False}
    ran.clear()
    monkeypatch.setattr(cli, "_run_server", lambda *a: {st.TF_SERVE: {"status": "ok"}})
    assert cli._run_with_fallback(tf, {}, Path("/tmp"), None, 1.0) == {
        st.TF_SERVE: {"status": "ok", "continuous_batching": True}}


def test_the_probe_says_what_came_back_unless_it_is_a_200(monkeypatch) -> None:
    import httpx

    answers = iter([httpx.Response(500, text="Internal Server Error"), httpx.Response(200, json={})])
    sent: list[tuple[str, dict]] = []

    def post(url: str, json: dict, timeout: float) -> httpx.Response:
        sent.append((url, json))
        return next(answers)

    monkeypatch.setattr(httpx, "post", post)
    (tf,) = [launch for launch in _launches() if launch.label == "transformers_serve"]
    assert tf.probe("http://127.0.0.1:1") == "the probe request answered 500: Internal Server Error"
    assert tf.probe("http://127.0.0.1:1") is None
    assert sent[0][0] == "http://127.0.0.1:1/v1/chat/completions" and sent[0][1]["max_tokens"] == 16
