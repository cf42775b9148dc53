"""The promotion gate: move the `champion` alias only when the candidate is better.

A candidate is promoted when its fast_1 is higher than the champion's (by at least `margin`, a
share of samples; 0: any rise) and neither its fast_0 (correctness) nor its compile rate is lower.
A candidate none of whose kernels is correct (fast_0 = 0) is never promoted; with no champion yet,
any other evaluated candidate is. The decision and both sides' figures are returned so they can be
logged.
"""

from __future__ import annotations

from dataclasses import dataclass

CHAMPION = "champion"
PREVIOUS_CHAMPION = "previous-champion"  # where `champion` pointed before its last move
GATE_KEYS = ("fast_0", "fast_1", "compile_rate")


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
