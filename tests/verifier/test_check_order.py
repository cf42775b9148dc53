"""The correctness draws: no expected output exists while the candidate runs (it could be found
through gc and copied, or overwritten along with the candidate's own output)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kernelwright.verifier import worker
from kernelwright.verifier.spec import Spec


class _Reference:
    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.alive: list[Any] = []

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.log.append("reference")
        return x * 2


def test_the_reference_output_is_computed_after_the_candidates_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    ref = _Reference(log)
    expected_ids: list[int] = []

    def run_candidate(new: Any, inputs: list[Any], timer: Any, guard: Any, like: Any) -> Any:
        log.append("candidate")
        assert like.shape == (4,) and not any(id(o) in expected_ids for o in (like,))
        return inputs[0] * 2

    def compare(out: Any, expected: Any, expected64: Any, rules: set[str]) -> tuple[None, str, float]:
        expected_ids.append(id(expected))
        log.append("compare")
        return None, "", 0.0

    monkeypatch.setattr(worker, "draw_check_inputs", lambda p, s, seed, dist: [torch.full((4,), float(seed))])
    monkeypatch.setattr(worker, "_run_candidate", run_candidate)
    monkeypatch.setattr(worker, "compare", compare)
    monkeypatch.setattr(worker, "fp64_output", lambda twin, inputs: None)
    spec = Spec(problem="p", candidate="c", result="r", seeds=(0,))
    refs: list[Any] = []
    worker._check_draws(None, {}, spec, (None, None), (ref, None, object()), (refs, set()))  # type: ignore[arg-type]
    per_draw = ["reference", "candidate", "candidate", "reference", "compare", "compare"]
    assert log == per_draw * len(worker.DISTRIBUTIONS)
    assert len(refs) == len(worker.DISTRIBUTIONS) and all(torch.equal(r, torch.zeros(4)) for r in refs)
