"""The judge on the CPU: what a runner's words can and cannot become, and the timed-output rule."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from kernelwright.verifier import judge
from kernelwright.verifier.channel import ChannelBroken, RunnerGone
from kernelwright.verifier.judge_checks import outcome_of_death
from kernelwright.verifier.link import RunnerRejected
from kernelwright.verifier.spec import Progress, Spec
from kernelwright.verifier.tolerance import TimedBound, judge_timed

PROBLEM = Path(__file__).parent.parent / "fixtures" / "verify" / "problems" / "affine.py"


def _judged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, failure: BaseException) -> Any:
    """The verdict `judged` reaches when the protocol ends with `failure`."""

    @contextlib.contextmanager
    def runner(_spec: Spec) -> Iterator[Any]:
        yield SimpleNamespace(ready=lambda: None, isolation="user nobody, landlock abi 7", link=None,
                              exit_code=lambda: 0, stderr_tail=lambda: "", cpu_s=lambda: 1.5,
                              outside_pid=None)

    def protocol(*_a: Any) -> Any:
        raise failure

    monkeypatch.setattr(judge, "started_runner", runner)
    monkeypatch.setattr(judge, "verify", protocol)
    spec = Spec(problem=str(PROBLEM), candidate="c.py", result=str(tmp_path / "r.json"))
    return judge.judged(spec, Progress(tmp_path / "r.json"))


@pytest.mark.parametrize(("failure", "reason"), [
    (RunnerRejected("ok", "correct, 50x"), "malformed_report"),  # no runner hands out a pass
    (RunnerRejected("timing_inconsistent", ""), "malformed_report"),  # nor a reason only the judge gives
    (RunnerRejected("compile_error", "nvcc failed"), "compile_error"),  # its own rejection stands
    (RunnerRejected("harness_tampering", "replaced: Timer.time_ms"), "harness_tampering"),
    (ChannelBroken("a reply that is not JSON"), "malformed_report"),
    (RunnerGone("no reply within 60 s", timed_out=True), "timeout"),
    (RunnerGone("the runner closed the channel"), "exit_called"),
])
def test_what_a_runner_says_becomes_a_verdict_about_its_candidate(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, failure: BaseException, reason: str) -> None:
    verdict = _judged(monkeypatch, tmp_path, failure)
    assert verdict.reason == reason and verdict.isolation == "user nobody, landlock abi 7"
    assert verdict.cpu_s["runner"] == 1.5 and verdict.cpu_s["judge"] > 0


def test_a_runner_ended_by_a_signal_is_a_crash() -> None:
    verdict = outcome_of_death(RunnerGone("closed"), "correctness", -11, "Segmentation fault")
    assert verdict.reason == "crash" and "SIGSEGV during correctness" in verdict.detail
    assert "Segmentation fault" in verdict.detail


def _calibrated() -> tuple[torch.Tensor, TimedBound]:
    """A float32 GEMM summed in another order than the reference's, on large-magnitude inputs: the
    bound its correctness draws give."""
    torch.manual_seed(0)
    bound = TimedBound()
    for _ in range(3):
        a, b = 4 * torch.randn(256, 256), 4 * torch.randn(256, 256)
        ref = a @ b
        other = (a[:, :128] @ b[:128]) + (a[:, 128:] @ b[128:])
        bound = bound.widened(other, ref)
    return ref, bound


def test_an_honest_reordering_passes_the_calibrated_timed_rule() -> None:
    torch.manual_seed(1)
    a, b = 4 * torch.randn(256, 256), 4 * torch.randn(256, 256)
    ref = a @ b
    _, bound = _calibrated()
    assert judge_timed((a[:, :128] @ b[:128]) + (a[:, 128:] @ b[128:]), ref, bound).ok
    assert (ref - (a[:, :64] @ b[:64] + a[:, 64:] @ b[64:])).abs().max() > 1e-4  # an absolute 1e-4 would fail it


@pytest.mark.parametrize("cheat", ["lazy", "bfloat16", "nan", "one_element"])
def test_what_timing_may_not_change_fails_the_calibrated_rule(cheat: str) -> None:
    torch.manual_seed(1)
    a, b = 4 * torch.randn(256, 256), 4 * torch.randn(256, 256)
    ref = a @ b
    _, bound = _calibrated()
    out = {"lazy": lambda: a[:, :4] @ b[:4] * 64, "bfloat16": lambda: (a.bfloat16() @ b.bfloat16()).float(),
           "nan": lambda: ref.clone().index_fill_(0, torch.tensor([3]), float("nan")),
           "one_element": lambda: ref.clone().index_put_((torch.tensor([7]), torch.tensor([9])), torch.tensor(1e4))}
    assert not judge_timed(out[cheat](), ref, bound).ok


class _RefModel:
    def __init__(self, moves: list[str]) -> None:
        self.moves = moves

    def cuda(self) -> _RefModel:
        self.moves.append("cuda")
        return self

    def cpu(self) -> _RefModel:
        self.moves.append("cpu")
        return self


def test_a_verdict_says_which_figures_were_taken_beside_other_candidates(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each shape timed while another candidate held the GPU has its line in `contention`; after the
    correctness draws the float64 twin is let go and the reference waits on the host until its timing."""
    from kernelwright.verifier.admission import Ledger
    from kernelwright.verifier.isolation import import_file
    from kernelwright.verifier.kb_view import Deferred
    from kernelwright.verifier.verdict import ShapeResult

    moves: list[str] = []
    checked = SimpleNamespace(worst=0.0, rules="fp64_relative", ref_model=_RefModel(moves), twin=object(), call={},
                              timed_bound=TimedBound(), fan_in=None, kb_ok=True, deferred=Deferred())
    monkeypatch.setattr(judge, "check_shape", lambda *a: checked)
    monkeypatch.setattr(judge, "check_not_decoy", lambda *a: None)
    monkeypatch.setattr(judge, "candidate_kernel_names", lambda path: set())
    monkeypatch.setattr(judge, "read_peak", lambda *a: 1 << 20)  # measured by an earlier judge

    def time_shape(problem: Any, shape: dict, *_a: Any) -> ShapeResult:
        moves.append("timed")
        return ShapeResult(shape=shape, correct=True, runtime_ms=1.0, ref_runtime_ms=2.0, speedup=2.0,
                           custom_kernel_time_share=0.9)

    monkeypatch.setattr(judge, "time_shape", time_shape)
    ledger = Ledger(tmp_path / "ledger.json", memory=lambda: None)
    spec = Spec(problem=str(PROBLEM), candidate="c.py", result=str(tmp_path / "r.json"), gpu_ledger=str(ledger.path))
    problem = import_file(PROBLEM, "kw_problem_contention")
    link = SimpleNamespace(ask=lambda op, **f: {})
    with ledger.admitted(1 << 30) as own:
        spec.ledger_token = own.token
        alone = judge.verify(spec, Progress(tmp_path / "r.json"), link, problem)  # type: ignore[arg-type]
        assert alone.correct and alone.contention == [] and checked.twin is None
        shapes = len(problem.SHAPES)  # the same reference stands in for each shape's
        assert moves[:shapes + 3] == ["cpu"] * shapes + ["cuda", "timed", "cpu"]  # on the host until timed
        with ledger.admitted(1 << 30):  # another candidate on the GPU
            crowded = judge.verify(spec, Progress(tmp_path / "r.json"), link, problem)  # type: ignore[arg-type]
    assert crowded.correct and len(crowded.contention) == shapes
    assert all("1 other candidate(s)" in line for line in crowded.contention)
