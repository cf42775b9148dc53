"""The KernelBench view beside the strict one, and how a failed draw is named, on the CPU."""

from __future__ import annotations

import math

import pytest
import torch

from kernelwright.verifier.isolation import Rejected
from kernelwright.verifier.judge_checks import classified
from kernelwright.verifier.kb_view import Deferred, kb_close, settle, strict_or_kb
from kernelwright.verifier.verdict import REASON_STATUS, Verdict, parse_report

F = torch.nn.functional


def test_kernelbench_tolerance_is_allclose_at_1e_2_relative_to_the_candidate() -> None:
    """allclose(ref, out): |ref - out| <= 1e-2 + 1e-2 * |out|, as KernelBench's eval calls it."""
    ref = torch.tensor([1.0, 0.0, -3.0])
    assert kb_close(torch.tensor([1.0202, 0.0099, -3.0]), ref)  # 0.0202 <= 0.01 + 0.0102: the candidate's side
    assert not torch.allclose(torch.tensor([1.0202]), torch.tensor([1.0]), atol=1e-2, rtol=1e-2)  # the other side
    assert not kb_close(torch.tensor([1.0, 0.0102, -3.0]), ref)
    assert not kb_close(torch.tensor([1.0, math.nan, -3.0]), torch.tensor([1.0, math.nan, -3.0]))  # NaN: never equal
    assert not kb_close(ref.half(), ref) and not kb_close(ref[:2], ref)
    assert kb_close((ref + 0.005).half(), ref.half()) and kb_close((ref + 0.005).bfloat16(), ref.bfloat16())
    ints = torch.tensor([1, 2])
    assert kb_close(ints.clone(), ints) and not kb_close(torch.tensor([1, 3]), ints)


def test_tanh_gelu_passes_kernelbench_where_the_strict_rule_rejects_it() -> None:
    x = torch.randn(256, 512, generator=torch.Generator().manual_seed(1))
    assert kb_close(F.gelu(x, approximate="tanh"), F.gelu(x))
    assert not kb_close(F.gelu(x) * 1.05, F.gelu(x))


def _ok(speedup: float) -> Verdict:
    return Verdict.of("ok", "correct", runtime_ms=1.0, ref_runtime_ms=speedup, speedup=speedup, compile_s=3.0)


def test_a_strict_failure_kernelbench_accepts_keeps_its_reason_with_the_kb_figures() -> None:
    held = Deferred()
    held.hold("approximation", "wrong on default inputs: tanh")
    held.hold("wrong_output", "a later draw")  # the first failure is the one kept
    v = settle(_ok(2.5), [(Deferred(), True), (held, True)])
    assert v.reason == "approximation" and v.status == REASON_STATUS["approximation"] == "incorrect"
    assert v.kb_correct is True and v.kb_speedup == 2.5 and v.speedup is None and v.runtime_ms == 1.0
    assert "tanh" in v.detail and "KernelBench" in v.detail
    assert parse_report(v.to_json()) == v  # the new fields travel through the report's checks
    late = settle(_ok(2.5), [(held, True), (Deferred(), False)])  # the re-check's fresh inputs failed its tolerance
    assert late.reason == "approximation" and late.kb_correct is False and late.kb_speedup is None


def test_a_strict_pass_carries_the_kernelbench_finding() -> None:
    v = settle(_ok(3.0), [(Deferred(), True)])
    assert v.correct and v.kb_correct is True and v.kb_speedup == 3.0 == v.speedup
    large = settle(_ok(3.0), [(Deferred(), True), (Deferred(), False)])  # 1e-2 absolute fails large outputs
    assert large.correct and large.kb_correct is False and large.kb_speedup is None and large.speedup == 3.0


def test_nothing_is_left_to_time_when_neither_view_passes() -> None:
    held = Deferred()
    held.hold("precision_downgrade", "bf16")
    with pytest.raises(Rejected) as exc:
        strict_or_kb([type("C", (), {"deferred": held, "kb_ok": True})(),
                      type("C", (), {"deferred": Deferred(), "kb_ok": False})()])
    assert exc.value.reason == "precision_downgrade"
    assert strict_or_kb([type("C", (), {"deferred": held, "kb_ok": True})()]) == [(held, True)]


# ---------------------------------------------------------------- naming a failed draw


def _args(out: torch.Tensor, inputs: list[torch.Tensor], expected: torch.Tensor, dist: str,
          previous: tuple[str, torch.Tensor] | None, passed: list[str]) -> tuple[str, str]:
    return classified("wrong_output", "fp64_relative: ...", out, inputs, expected, dist, previous, passed)


def test_a_tolerance_failure_on_some_distributions_is_a_wrong_output_naming_them() -> None:
    """An honest kernel that depends on its input but misses on heavy-tailed inputs is no class-3 cheat."""
    x = torch.randn(64, 64)
    out = torch.softmax(x, -1) * (1 + 1e-5)
    reason, detail = _args(out, [x], torch.softmax(x, -1), "heavy_tailed", ("signed", torch.rand(64, 64)),
                           ["default", "signed"])
    assert reason == "wrong_output" and detail.startswith("wrong on heavy_tailed inputs (right on default, signed)")
    reason, detail = _args(out, [x], torch.softmax(x, -1), "default", None, [])
    assert reason == "wrong_output" and detail.startswith("wrong on default inputs: ")
    for other in ("approximation", "precision_downgrade"):
        assert classified(other, "d", out, [x], torch.softmax(x, -1), "small", None, ["default"])[0] == other


def test_outputs_that_do_not_depend_on_the_input_are_input_independent() -> None:
    x = torch.rand(32, 32) * (2 * torch.randint(0, 2, (32, 32)) - 1)
    expected = torch.relu(x)
    previous = ("default", torch.rand(32, 32))
    assert _args(x.clone(), [x], expected, "signed", previous, ["default"])[0] == "input_independent"  # identity
    constant = torch.full((32, 32), 0.5)
    reason, detail = _args(constant, [x], expected, "signed", previous, ["default"])
    assert reason == "input_independent" and "constant" in detail
    same = previous[1].clone()
    assert _args(same, [x], expected, "signed", previous, ["default"])[0] == "input_independent"
    assert _args(same, [x], expected, "default", previous, [])[0] == "result_caching"  # within a distribution
    assert _args(constant, [x], torch.full((32, 32), 0.25), "signed", previous, [])[0] == "wrong_output"


def test_other_reasons_are_kept() -> None:
    x = torch.randn(8)
    for reason in ("unwritten_output", "shape_mismatch", "non_tensor_output"):
        kept = classified(reason, "d", x.clone(), [x], x, "signed", ("default", x.clone()), ["default"])
        assert kept == (reason, "d")
