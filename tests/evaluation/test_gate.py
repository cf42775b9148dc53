"""The gate of a registered version against the champion, as both the evaluate stage and retrain run it."""

from __future__ import annotations

import pytest

from kernelwright.evaluation import gate
from kernelwright.evaluation.gate import ALREADY_CHAMPION, gate_version

CANDIDATE = {"fast_0": 0.6, "fast_1": 0.4, "compile_rate": 1.0}
WEAKER = {"fast_0": 0.5, "fast_1": 0.2, "compile_rate": 1.0}


@pytest.fixture
def promoted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    """Each promotion the gate makes, instead of moving a registry alias."""
    seen: list[tuple[str, str, str]] = []
    monkeypatch.setattr(gate, "promote", lambda name, version, reason: seen.append((name, version, reason)))
    return seen


def test_a_better_version_is_promoted_with_the_note(promoted: list[tuple[str, str, str]]) -> None:
    decision = gate_version("m", "2", CANDIDATE, "1", lambda v: WEAKER, "own view, margin 0.1", 0.1)
    assert decision is not None and decision.promote and decision.champion == WEAKER
    assert promoted == [("m", "2", f"own view, margin 0.1: {decision.reason}")]


def test_the_first_version_is_promoted_without_a_champion(promoted: list[tuple[str, str, str]]) -> None:
    decision = gate_version("m", "1", CANDIDATE, None, lambda v: pytest.fail("no champion to read"), "own view")
    assert decision is not None and decision.promote and decision.reason == "no champion yet"
    assert promoted == [("m", "1", "own view: no champion yet")]


def test_the_champion_is_never_gated_against_itself(promoted: list[tuple[str, str, str]]) -> None:
    decision = gate_version("m", "3", CANDIDATE, "3", lambda v: pytest.fail("its own figures were read"), "own view")
    assert decision is not None and not decision.promote and decision.reason == ALREADY_CHAMPION
    assert promoted == []


def test_without_the_champions_figures_nothing_is_decided(promoted: list[tuple[str, str, str]]) -> None:
    asked: list[str] = []
    assert gate_version("m", "2", CANDIDATE, "1", lambda v: asked.append(v), "own view") is None
    assert asked == ["1"] and promoted == []


def test_a_worse_version_is_rejected(promoted: list[tuple[str, str, str]]) -> None:
    decision = gate_version("m", "2", WEAKER, "1", lambda v: CANDIDATE, "any view")
    assert decision is not None and not decision.promote and decision.reason == "fast_0 dropped"
    assert promoted == []
