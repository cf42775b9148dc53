"""The champion gate over MLflow's registry.

A registered version carries its suite figures as tags (`kw.eval.*`, both views, with the suite and
the judge version); the `champion` alias moves to it only when the gate says so (gate.py), and only
against a champion evaluated on the same suite by the same judge version.
"""

from __future__ import annotations

import logging

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from kernelwright.evaluation.gate import CHAMPION, GATE_KEYS, GateDecision, decide
from kernelwright.evaluation.metrics import OWN
from kernelwright.models import ModelRef
from kernelwright.verifier.verdict import JUDGE_VERSION

log = logging.getLogger(__name__)
TAG = "kw.eval."


def gate_figures(metrics: dict[str, float], view: str) -> dict[str, float]:
    """The figures the gate compares, in `view` ('own': own-kernel fast_0/fast_1; 'any': KernelBench's)."""
    prefix = OWN if view == "own" else ""
    keys = {"fast_0": prefix + "fast_0", "fast_1": prefix + "fast_1", "compile_rate": "compile_rate"}
    return {k: metrics[src] for k, src in keys.items() if src in metrics}


def _version_figures(client: MlflowClient, name: str, version: str, scope: dict[str, str],
                     view: str) -> dict[str, float] | None:
    """A version's recorded gate figures in `view`, if it was evaluated in the same scope."""
    tags = client.get_model_version(name, version).tags
    if any(tags.get(f"{TAG}{k}") != v for k, v in scope.items()):
        return None
    try:
        recorded = {k[len(TAG):]: float(v) for k, v in tags.items() if k.startswith(TAG) and k[len(TAG):] in
                    (*GATE_KEYS, *(OWN + g for g in GATE_KEYS))}
    except ValueError:
        return None
    figures = gate_figures(recorded, view)
    return figures if len(figures) == len(GATE_KEYS) else None


def record_and_gate(ref: ModelRef, metrics: dict[str, float], suite: str, view: str = "own") -> GateDecision:
    """Tag the version with its figures, compare with the champion, move the alias if it wins.

    Figures are compared only within one scope: the same suite (problems and samples) and the same
    judge version; `view` picks own-kernel or KernelBench figures.
    """
    assert ref.name is not None and ref.version is not None
    candidate = gate_figures(metrics, view)
    missing = [k for k in GATE_KEYS if k not in candidate]
    if missing:
        return GateDecision(False, f"not gated: {', '.join(missing)} not measured", candidate, None)
    client = MlflowClient()
    scope = {"suite": suite, "judge_version": JUDGE_VERSION}
    for key in (*GATE_KEYS, *(OWN + k for k in GATE_KEYS if k != "compile_rate")):
        if key in metrics:
            client.set_model_version_tag(ref.name, ref.version, f"{TAG}{key}", repr(metrics[key]))
    for key, value in scope.items():
        client.set_model_version_tag(ref.name, ref.version, f"{TAG}{key}", value)
    try:
        champ_version = client.get_model_version_by_alias(ref.name, CHAMPION).version
    except MlflowException:
        champ_version = None
    champion = None
    if champ_version is not None:
        if str(champ_version) == ref.version:
            return GateDecision(False, "this version is already the champion", candidate, None)
        champion = _version_figures(client, ref.name, str(champ_version), scope, view)
        if champion is None:
            return GateDecision(False, f"champion v{champ_version} has no figures on suite {suite} from judge "
                                       f"version {JUDGE_VERSION}; evaluate it on this suite first", candidate, None)
    decision = decide(candidate, champion)
    if decision.promote:
        client.set_registered_model_alias(ref.name, CHAMPION, ref.version)
        log.info("promoted %s v%s to %s (%s view): %s", ref.name, ref.version, CHAMPION, view, decision.reason)
    return decision
