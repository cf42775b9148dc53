from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from kernelwright.evaluation.gate import decide
from kernelwright.evaluation.metrics import fast_p, geomean_speedup, suite_metrics, summary
from kernelwright.verifier.verdict import Verdict


def _v(reason: str, speedup: float | None = None) -> Verdict:
    return Verdict.of(reason, speedup=speedup)


VERDICTS = [_v("ok", 2.0), _v("ok", 0.5), _v("ok", 1.0), _v("compile_error"), _v("fallback_runtime"),
            _v("wrong_output")]


def test_fast_p_counts_failures_in_the_denominator() -> None:
    assert fast_p(VERDICTS, 0.0) == pytest.approx(3 / 6)
    assert fast_p(VERDICTS, 1.0) == pytest.approx(1 / 6)  # strictly faster than p
    assert fast_p(VERDICTS, 0.4) == pytest.approx(3 / 6)
    assert fast_p([], 1.0) == 0.0


def test_geomean_and_summary() -> None:
    assert geomean_speedup(VERDICTS) == pytest.approx(1.0)  # (2 * 0.5 * 1) ** (1/3)
    s = summary(VERDICTS)
    assert s["compile_rate"] == pytest.approx(5 / 6)
    assert s["cheat_rate"] == pytest.approx(1 / 6)
    assert s["fast_p.2"] == 0.0 and s["fast_p.1.5"] == pytest.approx(1 / 6)
    assert math.isnan(s["mean_roofline_share"])


@dataclass(frozen=True)
class _Row:
    category: str
    verdict: Verdict
    compiled: bool = True
    gpu_verified: bool = True


def test_per_category() -> None:
    m = suite_metrics([_Row("x", _v("ok", 3.0)), _Row("y", _v("wrong_output"))])
    assert m["category.x.fast_1"] == 1.0 and m["category.y.fast_0"] == 0.0


def test_gate() -> None:
    champ = {"fast_1": 0.2, "fast_0": 0.5, "compile_rate": 0.9}
    assert decide({"fast_1": 0.3, "fast_0": 0.5, "compile_rate": 0.9}, champ).promote
    assert not decide({"fast_1": 0.3, "fast_0": 0.4, "compile_rate": 0.9}, champ).promote
    assert not decide({"fast_1": 0.3, "fast_0": 0.5, "compile_rate": 0.8}, champ).promote
    assert not decide({"fast_1": 0.2, "fast_0": 0.6, "compile_rate": 1.0}, champ).promote
    assert decide({"fast_1": 0.0, "fast_0": 0.0, "compile_rate": 0.0}, None).promote
