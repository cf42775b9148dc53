"""The gate of a registered version against the champion, as both the evaluate stage and retrain run it."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

import pytest

from kernelwright.evaluation import gate
from kernelwright.evaluation.gate import ALREADY_CHAMPION, GateDecision, gate_version, record_and_gate
from kernelwright.evaluation.registry import gate_figures
from kernelwright.models import ModelRef

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


def test_evaluations_side_by_side_gate_one_at_a_time(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Two equal versions gated at once, neither champion yet: without the gate lock both read "no champion"
    and both are promoted; with it the second is gated against the first."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")  # the lock's key only
    champion: list[str] = []
    recorded: dict[str, dict[str, float]] = {}
    both_read = threading.Barrier(2)

    def alias_version(name: str, alias: str) -> str | None:
        seen = champion[-1] if champion else None
        with contextlib.suppress(threading.BrokenBarrierError):
            both_read.wait(timeout=1.0)  # unlocked, both gates have read the champion here before either moves it
        return seen

    monkeypatch.setattr(gate, "alias_version", alias_version)
    monkeypatch.setattr(gate, "record_figures", lambda name, v, metrics, scope: recorded.__setitem__(v, metrics))
    monkeypatch.setattr(gate, "recorded_figures", lambda name, v, scope, view: gate_figures(recorded[v], view))
    monkeypatch.setattr(gate, "promote", lambda name, v, reason: champion.append(v))
    metrics = {"own.fast_0": 0.5, "own.fast_1": 0.3, "fast_0": 0.5, "fast_1": 0.3, "compile_rate": 0.9}
    decisions: dict[str, GateDecision] = {}

    def evaluate(version: str) -> None:
        decisions[version] = record_and_gate(ModelRef(f"models:/m/{version}", "m", version), metrics, "s", "t=0.2")

    threads = [threading.Thread(target=evaluate, args=(v,)) for v in ("1", "2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(champion) == 1  # one promotion: the other version was gated against it
    loser = {"1": "2", "2": "1"}[champion[0]]
    assert decisions[loser].reason == "fast_1 did not improve" and decisions[loser].champion is not None


def test_the_gate_lock_is_one_per_store_whatever_its_spelling_and_a_thread_may_retake_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from kernelwright.evaluation.registry import _store_key, gate_lock

    monkeypatch.chdir(tmp_path)
    assert _store_key("sqlite:///mlflow.db") == _store_key(f"sqlite:///{tmp_path}/sub/../mlflow.db")
    assert _store_key("mlruns") == _store_key(f"file://{tmp_path}/mlruns") == _store_key(str(tmp_path / "mlruns"))
    assert _store_key("http://tracking:5000") == "http://tracking:5000"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")
    done = threading.Event()

    def nested() -> None:  # a gate inside a gate of the same thread (an evaluation a gate runs) must not wait
        with gate_lock("m"), gate_lock("m"):
            done.set()

    worker = threading.Thread(target=nested, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert done.is_set()


@pytest.mark.parametrize(("promote", "reason", "note"), [
    (True, "no champion yet", "promoted to champion (no champion yet)"),
    (False, "fast_0 dropped", "not promoted (fast_0 dropped)")])
def test_the_evaluate_stage_note_leads_with_the_decision(monkeypatch: pytest.MonkeyPatch, promote: bool,
                                                          reason: str, note: str) -> None:
    """The closing line's `gate: ...` says what the gate did, not only why (`gate: no champion yet` read as a
    refusal where the version had been promoted)."""
    decided = GateDecision(promote, reason, CANDIDATE, None)
    monkeypatch.setattr(gate, "record_and_gate", lambda *args, **kwargs: decided)
    ref = ModelRef(uri="models:/m/1", name="m", version="1")
    assert gate.gate_evaluation(ref, CANDIDATE, "suite", "greedy", "own", True, True) == (decided, note)
