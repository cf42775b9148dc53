"""The champion gate over MLflow's registry.

A registered version carries its suite figures as tags (`kw.eval.*`); the `champion` alias moves
to it only when the gate says so (gate.py), and only against a champion evaluated on the same suite.
"""

from __future__ import annotations

import logging

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from kernelwright.evaluation.gate import CHAMPION, GATE_KEYS, GateDecision, decide
from kernelwright.models import ModelRef

log = logging.getLogger(__name__)
TAG = "kw.eval."


def _version_figures(client: MlflowClient, name: str, version: str, suite: str) -> dict[str, float] | None:
    tags = client.get_model_version(name, version).tags
    if tags.get(f"{TAG}suite") != suite:
        return None
    try:
        return {k: float(tags[f"{TAG}{k}"]) for k in GATE_KEYS}
    except (KeyError, ValueError):
        return None


def record_and_gate(ref: ModelRef, metrics: dict[str, float], suite: str) -> GateDecision:
    """Tag the version with its figures, compare with the champion, move the alias if it wins."""
    assert ref.name is not None and ref.version is not None
    client = MlflowClient()
    missing = [k for k in GATE_KEYS if k not in metrics]
    if missing:
        return GateDecision(False, f"not gated: {', '.join(missing)} not measured", metrics, None)
    for key in GATE_KEYS:
        client.set_model_version_tag(ref.name, ref.version, f"{TAG}{key}", repr(metrics[key]))
    client.set_model_version_tag(ref.name, ref.version, f"{TAG}suite", suite)
    try:
        champ_version = client.get_model_version_by_alias(ref.name, CHAMPION).version
    except MlflowException:
        champ_version = None
    champion = None
    if champ_version is not None:
        if str(champ_version) == ref.version:
            return GateDecision(False, "this version is already the champion", metrics, None)
        champion = _version_figures(client, ref.name, str(champ_version), suite)
        if champion is None:
            return GateDecision(False, f"champion v{champ_version} has no figures on suite {suite}; "
                                       "evaluate it on this suite first", metrics, None)
    decision = decide({k: metrics[k] for k in GATE_KEYS}, champion)
    if decision.promote:
        client.set_registered_model_alias(ref.name, CHAMPION, ref.version)
        log.info("promoted %s v%s to %s: %s", ref.name, ref.version, CHAMPION, decision.reason)
    return decision
