"""The tolerance rules (kernelwright/verifier/tolerance.py) on hand-made float64 cases, on the CPU."""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from kernelwright.verifier.guard import HarnessGuard
from kernelwright.verifier.inputs import _failure
from kernelwright.verifier.isolation import Rejected, import_file
from kernelwright.verifier.tolerance import (
    ALLCLOSE,
    EXACT,
    FP64,
    Judgement,
    fp64_output,
    fp64_twin,
    judge,
    lower_precision,
)


def _heavy(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) ** 3


def _blocked(a: torch.Tensor, b: torch.Tensor, block: int = 64) -> torch.Tensor:
    """a @ b in float32 as partial products of K-blocks, summed last block first."""
    acc = torch.zeros(a.shape[0], b.shape[1])
    for k in reversed(range(0, a.shape[1], block)):
        acc += a[:, k:k + block] @ b[k:k + block, :]
    return acc


def _sequential(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b in float32, one K term at a time: a one-thread-per-output kernel's order."""
    acc = torch.zeros(a.shape[0], b.shape[1])
    for k in range(a.shape[1]):
        acc += a[:, k:k + 1] * b[k:k + 1, :]
    return acc


@pytest.fixture(scope="module")
def matmul() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(a, b, reference, float64 reference): 512x512x512 in float32 on heavy-tailed inputs."""
    a, b = _heavy(512, 512, seed=0), _heavy(512, 512, seed=1)
    return a, b, a @ b, a.double() @ b.double()


@pytest.mark.parametrize("order", [_blocked, _sequential], ids=["blocked", "sequential"])
def test_an_honest_fp32_matmul_in_another_order_passes_where_allclose_failed(matmul, order) -> None:
    a, b, ref, ref64 = matmul
    out = order(a, b)
    assert not torch.allclose(out, ref, atol=1e-4, rtol=1e-4)  # the old rule rejected it
    j = judge(out, ref, ref64)
    assert j.ok and j.rule == FP64, j.detail
    assert j.rel_err < 1e-6 and j.rmse_ratio < 0.1 and j.max_ratio < 0.2


def test_lower_precision_in_an_fp32_problem_fails_and_reads_as_a_precision_downgrade(matmul) -> None:
    """bfloat16 inputs or a bfloat16-rounded reference (~1e-3 relative) fail; TF32-like input
    rounding (10 mantissa bits) and float16 inputs too."""
    a, b, ref, ref64 = matmul
    tf32 = [(x.view(torch.int32) & ~0x1FFF).view(torch.float32) for x in (a, b)]
    variants = {"bf16 inputs": a.bfloat16().float() @ b.bfloat16().float(), "bf16 output": ref.bfloat16().float(),
                "fp16 inputs": a.half().float() @ b.half().float(), "tf32 inputs": tf32[0] @ tf32[1]}
    for name, out in variants.items():
        j = judge(out, ref, ref64)
        assert not j.ok and j.failed == "normwise", name
        assert 1e-4 < j.rel_err < 1e-2 and j.rmse_ratio > 4, (name, j.detail)
        assert lower_precision(j, torch.float32), name
        assert _failure(out, ref, ref64, j)[0] == "precision_downgrade"


def test_a_long_sequential_fp32_sum_passes_and_its_bf16_rounding_does_not() -> None:
    """K = 8192 summed one term at a time: about 1e-6 relative, several times the reference's error."""
    a, b = _heavy(64, 8192, seed=2), _heavy(8192, 64, seed=3)
    ref, ref64 = a @ b, a.double() @ b.double()
    honest = judge(_sequential(a, b), ref, ref64)
    assert honest.ok, honest.detail
    assert 3e-7 < honest.rel_err < 3e-6 and honest.rel_err > honest.ref_rel_err
    assert not judge(ref.bfloat16().float(), ref, ref64).ok


def test_the_large_k_matmul_summed_one_term_at_a_time_passes() -> None:
    """KernelBench's large-K matmul (K = 2^19 of torch.rand) in a tiled GEMM's order, each output's
    sum sequential in float32: about 350 eps (positive terms round at the size of the partial sum),
    against a cascade sum's 1 eps. allclose at 1e-4 accepted it; so does the rule."""
    gen = torch.Generator().manual_seed(12)
    a, b = torch.rand(4, 2 ** 19, generator=gen), torch.rand(2 ** 19, 4, generator=gen)
    products = a.unsqueeze(1) * b.T.unsqueeze(0)  # (4, 4, K), float32
    acc = torch.zeros(16)
    for row in products.reshape(16, -1).T.contiguous():
        acc += row
    ref, ref64 = products.sum(-1), a.double() @ b.double()
    j = judge(acc.view(4, 4), ref, ref64)
    assert j.ok and j.rel_err > 200 * torch.finfo(torch.float32).eps > 100 * j.ref_rel_err, j.detail
    assert torch.allclose(acc.view(4, 4), ref, atol=1e-4, rtol=1e-4)


def test_a_few_garbage_elements_fail() -> None:
    """3 of 1e6 elements wrong: far off, zeroed, or off by 1e-3 relative (hidden in the norm, not in the max)."""
    x = torch.randn(1000, 1000, generator=torch.Generator().manual_seed(4))
    ref, ref64 = torch.sin(x) * x, torch.sin(x.double()) * x.double()
    assert judge(torch.sin(x) * x, ref, ref64).ok
    idx = torch.tensor([7, 424242, 999_000])
    for change, failed in [(lambda v: v + 10.0, "normwise"), (lambda v: v * 0.0, "normwise"),
                           (lambda v: v * 1.001 + 1e-3, "elementwise")]:
        out = ref.clone().view(-1)
        out[idx] = change(out[idx])
        j = judge(out.view_as(ref), ref, ref64)
        assert not j.ok and j.failed == failed, j.detail
        assert j.over_fraction < 1e-5 and not lower_precision(j, torch.float32)
        assert _failure(out.view_as(ref), ref, ref64, j)[0] == "wrong_output"


def test_an_exact_op_accepts_another_correct_rounding() -> None:
    """x + x is exact in float32 (no reference error); 3x - x rounds once more, up to an ulp."""
    x = torch.randn(4096, generator=torch.Generator().manual_seed(5))
    ref, ref64 = x + x, x.double() * 2
    out = x * 3 - x
    assert torch.equal(ref.double(), ref64) and not torch.equal(out, ref)
    assert judge(out, ref, ref64).ok


def test_nan_returned_where_the_fp64_reference_is_finite_fails() -> None:
    x = torch.randn(256, generator=torch.Generator().manual_seed(6))
    ref, ref64 = x * 2, x.double() * 2
    out = ref.clone()
    out[3] = math.nan
    j = judge(out, ref, ref64)
    assert not j.ok and j.failed == "nan"
    assert _failure(out, ref, ref64, j)[0] == "unwritten_output"
    # the reference's output filled with NaN too, and NaN returned: NaN never equals NaN by itself
    nan = torch.full_like(ref, math.nan)
    assert not judge(nan, nan, ref64).ok
    assert _failure(nan, nan, ref64, judge(nan, nan, ref64))[0] == "wrong_output"


def test_nan_where_the_fp64_reference_is_nan_passes() -> None:
    x = torch.randn(256, generator=torch.Generator().manual_seed(7))
    ref, ref64 = torch.log(x), torch.log(x.double())
    assert bool(torch.isnan(ref64).any())
    assert judge(torch.log(x), ref, ref64).ok
    assert not judge(torch.log(x).nan_to_num(), ref, ref64).ok  # a finite value where it is NaN


def test_inf_sign_and_overflow() -> None:
    x = torch.tensor([1.0, -1.0, 2.0, 0.5])
    ref64 = x.double() / torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=torch.float64)  # +inf, -inf, 2, 0.5
    ref = ref64.float()
    assert judge(ref.clone(), ref, ref64).ok
    flipped = ref.clone()
    flipped[0] = -math.inf
    j = judge(flipped, ref, ref64)
    assert not j.ok and j.failed == "inf"
    assert _failure(flipped, ref, ref64, j)[0] == "wrong_output"
    # beyond float32's range in float64: the rounded truth is inf, and an inf output is right
    big = torch.tensor([1e39, 1.0], dtype=torch.float64)
    assert judge(big.float(), big.float(), big).ok
    assert not judge(torch.tensor([3e38, 1.0]), big.float(), big).ok


def test_float16_outputs() -> None:
    """A float16 matmul: float32 accumulation in another order passes; bfloat16 arithmetic and a
    garbage element fail."""
    a, b = _heavy(128, 256, seed=8).half(), _heavy(256, 128, seed=9).half()
    ref, ref64 = a @ b, a.double() @ b.double()
    assert judge(_blocked(a.float(), b.float(), 32).half(), ref, ref64).ok
    assert not judge((a.bfloat16() @ b.bfloat16()).half(), ref, ref64).ok
    bad = ref.clone()
    bad[5, 5] = bad[5, 5] * 1.5 + 1
    j = judge(bad, ref, ref64)
    assert not j.ok and not lower_precision(j, torch.float16)


def test_integer_and_boolean_outputs_are_exact() -> None:
    x = torch.randn(64, 32, generator=torch.Generator().manual_seed(10))
    ref = x.argmax(dim=1)
    j = judge(ref.clone(), ref, None)
    assert j.ok and j.rule == EXACT
    off = ref.clone()
    off[0] += 1
    assert not judge(off, ref, None).ok and not judge(x > 0.1, x > 0, None).ok


def test_without_a_float64_reference_the_fallback_rule_judges() -> None:
    """No ref64, or one of another shape or dtype: fp32_allclose, with NaN patterns that must match."""
    x = torch.randn(1000, generator=torch.Generator().manual_seed(11))
    ref = x * 3
    for ref64 in (None, (x.double() * 3)[:10], (x * 3).half()):
        j = judge(x * 3 + 1e-6, ref, ref64)
        assert j.ok and j.rule == ALLCLOSE and j.detail.startswith(ALLCLOSE)
    assert not judge(x * 3 + 1e-2, ref, None).ok
    nan_ref = ref.clone()
    nan_ref[0] = math.nan
    assert judge(nan_ref.clone(), nan_ref, None).ok  # NaN exactly where the reference has it
    j = judge(torch.full_like(ref, math.nan), ref, None)
    assert not j.ok and j.failed == "nan" and _failure(torch.full_like(ref, math.nan), ref, None, j)[0] == \
        "unwritten_output"


# ---------------------------------------------------------------- the float64 twin


def _candidate(cls: type) -> ModuleType:
    mod = ModuleType("candidate")
    mod.ModelNew = cls  # type: ignore[attr-defined]
    return mod


PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.linear = nn.Linear(n, n)
        self.register_buffer("shift", torch.randn(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x) + self.shift)


def get_inputs(batch: int = 16):
    return [torch.randn(batch, 32)]


def get_init_inputs():
    return [32]
"""


def _reference_and_twin(problem: ModuleType, warm: list[torch.Tensor]) -> tuple[torch.nn.Module, Any]:
    """As the judge builds them (judge_checks.reference_models), on the CPU."""
    init = problem.get_init_inputs()
    torch.manual_seed(0)
    ref = problem.Model(*init).eval()
    with torch.no_grad():
        ref(*[w.clone() for w in warm])
    return ref, fp64_twin(problem, init, ref, 0, warm, "cpu")


def test_the_twin_of_a_problem_runs_in_float64(tmp_path: Path) -> None:
    (tmp_path / "linear_relu.py").write_text(PROBLEM)
    problem = import_file(tmp_path / "linear_relu.py", "kw_test_tol_linear_relu")
    ref, twin = _reference_and_twin(problem, problem.get_inputs(batch=64))
    assert twin is not None and twin is not ref
    assert all(t.dtype == torch.float64 for t in [*twin.parameters(), *twin.buffers()])
    pairs = zip([*ref.parameters(), *ref.buffers()], [*twin.parameters(), *twin.buffers()], strict=True)
    assert all(torch.equal(r.double(), t) for r, t in pairs)
    x = problem.get_inputs(batch=64)
    with torch.no_grad():
        expected, expected64 = ref(*x), fp64_output(twin, x)
    assert expected64.dtype == torch.float64 and judge(expected, expected, expected64).ok


class _Float32Inside(torch.nn.Module):
    """A reference that fixes its dtype inside: in float64 its matmul raises."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.randn(8, 8)  # a plain attribute: .double() leaves it float32

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w


class _Float32Output(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 2).float()


@pytest.mark.parametrize("model", [_Float32Inside, _Float32Output])
def test_a_problem_that_cannot_run_in_float64_has_no_twin(model: type) -> None:
    problem = ModuleType("problem")
    problem.Model, problem.get_init_inputs = model, list  # type: ignore[attr-defined]
    ref = model()
    assert fp64_twin(problem, [], ref, 0, [torch.randn(4, 8)], device="cpu") is None
    assert fp64_output(None, [torch.randn(4, 8)]) is None


def test_the_twin_of_a_lazy_reference_gets_its_weights() -> None:
    problem = ModuleType("problem")

    class Lazy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.LazyLinear(3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x)

    problem.Model, problem.get_init_inputs = Lazy, list  # type: ignore[attr-defined]
    warm = [torch.randn(2, 5)]
    ref, twin = _reference_and_twin(problem, warm)
    assert twin is not None and torch.equal(twin.fc.weight, ref.fc.weight.double())


def test_the_judgement_class_is_held() -> None:
    """A property set on Judgement could make every verdict pass; its fields are slots the guard holds."""
    guard = HarnessGuard()
    original = Judgement.ok
    try:
        Judgement.ok = property(lambda self: True)  # type: ignore[assignment,method-assign]
        with pytest.raises(Rejected) as exc:
            guard.check()
        assert "Judgement.ok" in exc.value.detail
    finally:
        Judgement.ok = original  # type: ignore[method-assign]
    guard.check()
