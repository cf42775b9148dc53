from __future__ import annotations

import math

import pytest

from kernelwright.evaluation.gate import decide
from kernelwright.evaluation.metrics import (
    NO_CORRECT,
    fast_p,
    geomean_speedup,
    metric_key,
    parse_metric_key,
    suite_figures,
)
from kernelwright.verifier.verdict import Verdict
from tests.evaluation._rows import FakeRow


def _v(reason: str, speedup: float | None = None) -> Verdict:
    return Verdict.of(reason, speedup=speedup)


VERDICTS = [_v("ok", 2.0), _v("ok", 0.5), _v("ok", 1.0), _v("compile_error"), _v("fallback_runtime"),
            _v("wrong_output")]


def test_fast_p_counts_failures_in_the_denominator() -> None:
    assert fast_p(VERDICTS, 0.0) == pytest.approx(3 / 6)
    assert fast_p(VERDICTS, 1.0) == pytest.approx(1 / 6)  # strictly faster than p
    assert fast_p(VERDICTS, 0.4) == pytest.approx(3 / 6)
    assert fast_p([], 1.0) == 0.0


def test_geomean_and_group_figures() -> None:
    assert geomean_speedup(VERDICTS) == pytest.approx(1.0)  # (2 * 0.5 * 1) ** (1/3)
    g = suite_figures([FakeRow("x", v, compiled=v.reason != "compile_error") for v in VERDICTS], gpu=True).overall
    assert g.values["compile_rate"] == pytest.approx(5 / 6)
    assert g.values["cheat_rate"] == pytest.approx(1 / 6)
    assert g.values["fast_p.2"] == 0.0 and g.values["fast_p.1.5"] == pytest.approx(1 / 6)
    assert "mean_roofline_share" not in g.values and "flops" in g.not_applicable["mean_roofline_share"]


def test_per_category() -> None:
    figures = suite_figures([FakeRow("x", _v("ok", 3.0)), FakeRow("y", _v("wrong_output"))], gpu=True)
    m = figures.flat()
    assert m[metric_key("fast_1", "x")] == 1.0 and m[metric_key("fast_0", "y")] == 0.0
    assert sorted(figures.categories) == ["x", "y"]


def test_a_gpu_run_where_every_candidate_failed_records_zero_rates_and_no_speed_figure() -> None:
    rows = [FakeRow("a", _v("syntax_error"), compiled=False, gpu_verified=False),
            FakeRow("b", _v("no_candidate"), compiled=False, gpu_verified=False)]
    figures = suite_figures(rows, gpu=True)
    g = figures.overall
    assert g.values["compile_rate"] == 0.0 and g.values["fast_0"] == 0.0 and g.values["fast_1"] == 0.0
    assert all(g.values[f"fast_p.{p:g}"] == 0.0 for p in (0.0, 0.5, 5.0))
    assert "geomean_speedup" not in g.values and g.not_applicable["geomean_speedup"] == NO_CORRECT
    assert all(not math.isnan(v) for v in figures.flat().values())
    assert figures.flat_not_applicable()[metric_key("geomean_speedup", "a")] == NO_CORRECT


def test_without_a_gpu_speed_figures_do_not_apply_and_say_why() -> None:
    g = suite_figures([FakeRow("x", _v("no_gpu"))], gpu=False, no_gpu_reason="no CUDA device here").overall
    assert "fast_0" not in g.values and g.not_applicable["fast_0"] == "no CUDA device here"
    assert g.values["samples"] == 1.0


@pytest.mark.parametrize("category", ["convolution", "level1", "a.b.c", "fast_p.0"])
@pytest.mark.parametrize("figure", ["fast_p.0.5", "fast_1", "fast_p.1.2", "samples"])
def test_metric_keys_round_trip(category: str, figure: str) -> None:
    assert parse_metric_key(metric_key(figure, category)) == (category, figure)
    assert parse_metric_key(metric_key(figure)) == (None, figure)


def test_a_category_name_with_a_slash_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot hold"):
        metric_key("fast_0", "a/b")


def test_gate() -> None:
    champ = {"fast_1": 0.2, "fast_0": 0.5, "compile_rate": 0.9}
    assert decide({"fast_1": 0.3, "fast_0": 0.5, "compile_rate": 0.9}, champ).promote
    assert not decide({"fast_1": 0.3, "fast_0": 0.4, "compile_rate": 0.9}, champ).promote
    assert not decide({"fast_1": 0.3, "fast_0": 0.5, "compile_rate": 0.8}, champ).promote
    assert not decide({"fast_1": 0.2, "fast_0": 0.6, "compile_rate": 1.0}, champ).promote
    assert decide({"fast_1": 0.0, "fast_0": 0.1, "compile_rate": 0.5}, None).promote


def test_a_version_with_no_correct_kernel_is_never_promoted() -> None:
    first = decide({"fast_1": 0.0, "fast_0": 0.0, "compile_rate": 0.0}, None)
    assert not first.promote and "fast_0 is 0" in first.reason
    worse = decide({"fast_1": 0.0, "fast_0": 0.0, "compile_rate": 1.0}, {"fast_1": 0.0, "fast_0": 0.0,
                                                                           "compile_rate": 0.5})
    assert not worse.promote
    assert not decide({"fast_0": 0.5}, None).promote  # figures missing: never promoted


def test_both_views_of_correctness() -> None:
    rows = [FakeRow("x", Verdict.of("ok", speedup=2.0, custom_kernel_time_share=0.95)),
            FakeRow("x", Verdict.of("ok", speedup=3.0, custom_kernel_time_share=0.5)),   # partial PyTorch
            FakeRow("x", Verdict.of("ok", speedup=4.0)),                                  # share not measured
            FakeRow("x", Verdict.of("wrong_output"))]
    g = suite_figures(rows, gpu=True).overall.values
    assert g["fast_0"] == 0.75 and g["fast_1"] == 0.75 and g["own.fast_0"] == 0.25 and g["own.fast_1"] == 0.25
    assert g["geomean_speedup"] == pytest.approx((2 * 3 * 4) ** (1 / 3)) and g["own.geomean_speedup"] == 2.0
    assert g["mean_custom_kernel_time_share"] == pytest.approx(0.725)
    loose = suite_figures(rows, gpu=True, own_share=0.4).overall.values
    assert loose["own.fast_0"] == 0.5
    assert suite_figures(rows, gpu=True, own_share=0.0).overall.values["own.fast_0"] == 0.5  # None never counts


def test_the_kernelbench_view_counts_what_its_tolerance_accepted_and_the_gate_ignores_it() -> None:
    """kb.* counts the verdicts KernelBench's tolerance accepted (kb_correct), at kb_speedup: a strict
    approximation within 1e-2 is in, a strict pass beyond KernelBench's tolerance is out."""
    rows = [FakeRow("x", Verdict.of("ok", speedup=2.0, kb_correct=True, kb_speedup=2.0)),
            FakeRow("x", Verdict.of("approximation", kb_correct=True, kb_speedup=3.0)),
            FakeRow("x", Verdict.of("ok", speedup=0.5, kb_correct=False)),  # large outputs: 1e-2 absolute fails
            FakeRow("x", Verdict.of("wrong_output", kb_correct=False)),
            FakeRow("x", Verdict.of("ok", speedup=4.0))]  # a verdict of an older judge: not judged by that view
    g = suite_figures(rows, gpu=True).overall.values
    assert g["fast_0"] == 0.6 and g["fast_1"] == 0.4 and g["geomean_speedup"] == pytest.approx(4 ** (1 / 3))
    assert g["kb.fast_0"] == 0.4 and g["kb.fast_1"] == 0.4 and g["kb.geomean_speedup"] == pytest.approx(6 ** 0.5)
    strict = {k: v for k, v in g.items() if not k.startswith("kb.")}
    assert decide(strict, None).promote == decide(g, None).promote  # the gate reads the strict figures only


def test_the_kernelbench_view_without_a_gpu_or_a_sample_it_accepts() -> None:
    g = suite_figures([FakeRow("x", _v("no_gpu"))], gpu=False, no_gpu_reason="no CUDA device here").overall
    assert g.not_applicable["kb.fast_0"] == "no CUDA device here"
    assert g.not_applicable["kb.geomean_speedup"] == "no CUDA device here"
    g = suite_figures([FakeRow("x", _v("wrong_output"))], gpu=True).overall
    assert g.values["kb.fast_0"] == 0.0 and "kb.geomean_speedup" in g.not_applicable
