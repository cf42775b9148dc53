"""The retrain's gate evaluates the champion outside the registry's gate lock."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelwright.retrain import champion
from kernelwright.retrain.config import RetrainConfig

METRICS = {"own.fast_0": 0.5, "own.fast_1": 0.25, "compile_rate": 0.75}


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """A stand-in registry: the champion alias, recorded figures, and what each evaluation saw of the lock."""
    state = SimpleNamespace(champion="1", moves=[], recorded={}, evaluated=[], locked=False, promoted=[])

    @contextmanager
    def lock(name: str) -> Iterator[None]:
        state.locked = True
        if state.moves:  # another gate moves the champion while this one waited for the lock
            state.champion = state.moves.pop(0)
        try:
            yield
        finally:
            state.locked = False

    def evaluate(cfg, verifier):  # noqa: ANN001, ANN202
        version = Path(cfg.out).name.removeprefix("v")
        state.evaluated.append((version, state.locked))
        return SimpleNamespace(gpu_verified=state.gpu, metrics={**METRICS, "own.fast_1": state.fast_1[version]})

    state.gpu = True
    state.fast_1 = {"1": 0.1, "2": 0.25, "3": 0.05}
    monkeypatch.setattr(champion, "gate_lock", lock)
    monkeypatch.setattr(champion, "alias_version", lambda name, alias: state.champion)
    monkeypatch.setattr(champion, "record_figures", lambda name, v, metrics, scope: state.recorded.__setitem__(
        v, champion.gate_figures(metrics, "own")))
    monkeypatch.setattr(champion, "recorded_figures", lambda name, v, scope, view: state.recorded.get(v))
    monkeypatch.setattr(champion, "stage_run", lambda *a, **k: nullcontext())
    monkeypatch.setattr(champion, "_tagged", lambda name, version, outcome: outcome)
    monkeypatch.setattr(champion, "run_evaluate", evaluate)
    monkeypatch.setattr("kernelwright.evaluation.gate.promote",
                        lambda name, version, reason: state.promoted.append(version))
    return state


def _gate(tmp_path: Path, version: str = "2") -> champion.GateOutcome:
    cfg = RetrainConfig(workdir=str(tmp_path))
    return champion.run_gate(cfg, version, champion.GateScope({}, "key", tmp_path), None)


def test_the_champion_is_evaluated_before_the_lock_and_only_read_under_it(registry: SimpleNamespace,
                                                                          tmp_path: Path) -> None:
    outcome = _gate(tmp_path)
    assert registry.evaluated == [("2", False), ("1", False)]  # neither evaluation held the gate
    assert outcome.decision == champion.PROMOTED and registry.promoted == ["2"]
    assert outcome.champion_before == "1" and outcome.champion == registry.recorded["1"]


def test_a_champion_that_moved_while_waiting_for_the_lock_is_evaluated_there(registry: SimpleNamespace,
                                                                            tmp_path: Path) -> None:
    registry.moves = ["3"]
    outcome = _gate(tmp_path)
    assert registry.evaluated == [("2", False), ("1", False), ("3", True)]
    assert outcome.champion_before == "3" and outcome.decision == champion.PROMOTED


def test_a_champion_with_recorded_figures_is_not_evaluated_again(registry: SimpleNamespace, tmp_path: Path) -> None:
    registry.recorded["1"] = champion.gate_figures({**METRICS, "own.fast_1": 0.5}, "own")
    outcome = _gate(tmp_path)
    assert registry.evaluated == [("2", False)]
    assert outcome.decision == champion.REJECTED and registry.promoted == []


def test_without_a_gpu_nothing_is_decided_and_the_champion_is_not_evaluated(registry: SimpleNamespace,
                                                                           tmp_path: Path) -> None:
    registry.gpu = False
    outcome = _gate(tmp_path)
    assert outcome.decision == champion.NOT_GATED and registry.evaluated == [("2", False)]
