"""The promotion gate: move the `champion` alias only when the candidate is better.

The rule (`decide`): a candidate is promoted when its fast_1 is higher than the champion's (by at
least `margin`, a share of samples; 0: any rise) and neither its fast_0 (correctness) nor its
compile rate is lower. A candidate none of whose kernels is correct (fast_0 = 0) is never promoted;
with no champion yet, any other evaluated candidate is.

Against the registry (`gate_version`): a registered version is compared with the version `champion`
points to, never with itself, and only with figures of that champion measured in the same scope
(registry.eval_scope: suite, sampling, judge version, GPU type); where there are none, nothing is
decided. A promotion moves `champion` and sets `previous-champion` (registry.promote).

`record_and_gate` is the evaluate stage's way (figures recorded on the version, the champion's read
back from its tags, under the registry's `gate_lock`), `gate_evaluation` its preconditions; the
retrain job (retrain/champion.py) evaluates the champion again where its figures are missing, then
calls `gate_version` under the same lock. The decision and both sides' figures are returned so they
can be logged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kernelwright.evaluation.registry import (
    CHAMPION,
    GATE_KEYS,
    alias_version,
    eval_scope,
    gate_figures,
    gate_lock,
    promote,
    record_figures,
    recorded_figures,
)
from kernelwright.models import ModelRef
from kernelwright.verifier.verdict import JUDGE_VERSION

ALREADY_CHAMPION = "this version is already the champion"


@dataclass(frozen=True)
class GateDecision:
    promote: bool
    reason: str
    candidate: dict[str, float]
    champion: dict[str, float] | None


def decide(candidate: dict[str, float], champion: dict[str, float] | None, margin: float = 0.0) -> GateDecision:
    missing = [k for k in GATE_KEYS if k not in candidate or (champion is not None and k not in champion)]
    if missing:
        return GateDecision(False, f"metrics missing: {', '.join(missing)}", candidate, champion)
    if candidate["fast_0"] <= 0.0:
        return GateDecision(False, "fast_0 is 0: no generated kernel is correct", candidate, champion)
    if champion is None:
        return GateDecision(True, "no champion yet", candidate, None)
    if candidate["fast_0"] < champion["fast_0"]:
        return GateDecision(False, "fast_0 dropped", candidate, champion)
    if candidate["compile_rate"] < champion["compile_rate"]:
        return GateDecision(False, "compile rate dropped", candidate, champion)
    if candidate["fast_1"] <= champion["fast_1"]:
        return GateDecision(False, "fast_1 did not improve", candidate, champion)
    if candidate["fast_1"] - champion["fast_1"] < margin:
        return GateDecision(False, f"fast_1 rose by less than the margin {margin:g}", candidate, champion)
    return GateDecision(True, "fast_1 improved with no drop in fast_0 or compile rate", candidate, champion)


def gate_version(name: str, version: str, candidate: dict[str, float], champion_version: str | None,
                 champion_figures: Callable[[str], dict[str, float] | None], note: str,
                 margin: float = 0.0) -> GateDecision | None:
    """Gate registered `version` (its gate figures `candidate`) against `champion_version`, where `champion`
    pointed (None: no champion yet), whose figures `champion_figures` gives; promote it when `decide` says so,
    with `note` before the reason. None: the champion's figures could not be had, so nothing is decided."""
    if champion_version == version:
        return GateDecision(False, ALREADY_CHAMPION, candidate, None)
    champion = None
    if champion_version is not None:
        champion = champion_figures(champion_version)
        if champion is None:
            return None
    decision = decide(candidate, champion, margin)
    if decision.promote:
        promote(name, version, f"{note}: {decision.reason}")
    return decision


def record_and_gate(ref: ModelRef, metrics: dict[str, float], suite: str, sampling: str, view: str = "own",
                    margin: float = 0.0) -> GateDecision:
    """Tag the version with its figures, compare with the champion's recorded ones, move the alias if it wins.

    Figures are compared only within one scope (`eval_scope`: suite, sampling, judge version, GPU
    type); `view` picks own-kernel or KernelBench figures.
    """
    assert ref.name is not None and ref.version is not None
    name = ref.name
    candidate = gate_figures(metrics, view)
    missing = [k for k in GATE_KEYS if k not in candidate]
    if missing:
        return GateDecision(False, f"not gated: {', '.join(missing)} not measured", candidate, None)
    scope = eval_scope(suite, sampling)
    record_figures(name, ref.version, metrics, scope)
    with gate_lock(name):  # the champion read and moved in one step
        champ_version = alias_version(name, CHAMPION)
        decision = gate_version(name, ref.version, candidate, champ_version,
                                lambda v: recorded_figures(name, v, scope, view), f"{view} view", margin)
    if decision is None:
        return GateDecision(False, f"champion v{champ_version} has no figures on suite {suite} sampled "
                                   f"with {sampling} from judge version {JUDGE_VERSION} on GPU type "
                                   f"{scope['gpu_type']}; evaluate it the same way first", candidate, None)
    return decision


def gate_evaluation(ref: ModelRef | None, metrics: dict[str, float], suite: str, sampling: str, view: str,
                    enabled: bool, gpu: bool) -> tuple[GateDecision | None, str]:
    """The evaluate stage's gate: (decision, note), or no decision and why (gate off, not a registered
    version, not GPU-verified)."""
    if not enabled:
        return None, "gate off (--gate false)"
    if ref is None or ref.version is None:
        return None, "the model is not a registered version (pass --model models:/NAME@ALIAS to gate it)"
    if not gpu:
        return None, "not GPU-verified: fast_1 was not measured, so the champion stays"
    decision = record_and_gate(ref, metrics, suite, sampling, view)
    return decision, f"{'promoted to champion' if decision.promote else 'not promoted'} ({decision.reason})"
