"""The retrain's gate: the candidate and, where needed, the champion evaluated in one scope, then the
gate (evaluation/gate.py: `gate_version`) decides and moves the aliases, under the registry's gate lock,
against the champion read there (an evaluation beside the retrain may have moved it meanwhile).
The champion is evaluated before the lock is taken, so other gates of the same model (an evaluation, a
second retrain's) wait for a decision, not for an evaluation; only a champion that moved in between is
evaluated under the lock.

The champion is evaluated again when it has no figures from the same judge version, suite, samples
and GPU type. Without a GPU there is no fast_1: the decision is `not_gated` and no alias moves.
Figures already recorded on a version in the same scope (a run killed after its evaluation) are
reused instead of measured again.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import mlflow

from kernelwright.evaluation.checking import Verifier
from kernelwright.evaluation.gate import gate_version
from kernelwright.evaluation.registry import (
    CHAMPION,
    GATE_TAG,
    alias_version,
    gate_figures,
    gate_lock,
    record_figures,
    recorded_figures,
)
from kernelwright.evaluation.stage import run_evaluate
from kernelwright.job_config import evaluate_config
from kernelwright.retrain.config import RetrainConfig
from kernelwright.tracking import stage_run
from kernelwright.verifier.ray_fanout import connected
from kernelwright.workdir import resolve_workdir

log = logging.getLogger(__name__)
PROMOTED, REJECTED, NOT_GATED, SKIPPED = "promoted", "rejected", "not_gated", "skipped"
NOT_GATED_REASON = "not GPU-verified: fast_1 was not measured, so no alias moved"


@dataclass
class GateOutcome:
    decision: str  # promoted, rejected or not_gated
    reason: str
    candidate: dict[str, float] = field(default_factory=dict)  # gate figures (shares of samples)
    champion: dict[str, float] | None = None
    champion_before: str | None = None  # version `champion` pointed to when the gate started


@dataclass(frozen=True)
class GateScope:
    figures: dict[str, str]  # registry scope: suite, judge_version, gpu_type
    key: str  # digest of the scope and the view: names the evaluation folders
    out: Path  # <workdir>/retrain/evaluate-<key>


def _evaluate_version(cfg: RetrainConfig, version: str, scope: GateScope, verifier: Verifier | None,
                      run_name: str) -> dict[str, float] | None:
    """Evaluate registered `version` in a child run; record and return its gate figures (None: no GPU)."""
    with stage_run(run_name, tags={"model.version": version}):
        result = run_evaluate(evaluate_config(
            cfg, resolve_workdir(cfg.workdir), f"models:/{cfg.registered_model}/{version}", suite=cfg.suite,
            temperature=cfg.temperature, batch_size=cfg.eval_batch_size, gate=False, gate_view=cfg.gate_view,
            ray=cfg.ray, ray_gpu_fraction=cfg.ray_gpu_fraction, out=str(scope.out / f"v{version}")),
            verifier=verifier)
    if not result.gpu_verified:
        return None
    record_figures(cfg.registered_model, version, result.metrics, scope.figures)
    return gate_figures(result.metrics, cfg.gate_view)


def _figures(cfg: RetrainConfig, version: str, scope: GateScope, verifier: Verifier | None,
             run_name: str) -> dict[str, float] | None:
    recorded = recorded_figures(cfg.registered_model, version, scope.figures, cfg.gate_view)
    if recorded is not None:
        log.info("v%s already has figures in this scope: not evaluated again", version)
        return recorded
    return _evaluate_version(cfg, version, scope, verifier, run_name)


def run_gate(cfg: RetrainConfig, version: str, scope: GateScope, verifier: Verifier | None) -> GateOutcome:
    """Evaluate the candidate `version` (and the champion if needed) and gate it; see the module doc. With
    --ray both evaluations verify on the cluster, over one connection."""
    name = cfg.registered_model
    with connected(cfg.ray) if cfg.ray else nullcontext():
        candidate = _figures(cfg, version, scope, verifier, "evaluate")
        if candidate is None:
            return _tagged(name, version, GateOutcome(NOT_GATED, NOT_GATED_REASON,
                                                      champion_before=alias_version(name, CHAMPION)))
        before = alias_version(name, CHAMPION)  # evaluated (or its figures read) outside the lock
        if before not in (None, version) and _figures(cfg, before, scope, verifier, "evaluate[champion]") is None:
            return _tagged(name, version, _champion_unverified(candidate, before))
        with gate_lock(name):  # against the champion now: an evaluation beside this one may have moved it
            before = alias_version(name, CHAMPION)
            decision = gate_version(name, version, candidate, before,
                                    lambda v: _figures(cfg, v, scope, verifier, "evaluate[champion]"),
                                    f"{cfg.gate_view} view, margin {cfg.margin:g}", cfg.margin)
        if decision is None:
            return _tagged(name, version, _champion_unverified(candidate, before))
        return _tagged(name, version, GateOutcome(PROMOTED if decision.promote else REJECTED, decision.reason,
                                                  candidate, decision.champion, before))


def _champion_unverified(candidate: dict[str, float], champion: str | None) -> GateOutcome:
    return GateOutcome(NOT_GATED, f"champion v{champion} could not be GPU-verified here", candidate,
                       champion_before=champion)


def _tagged(name: str, version: str, outcome: GateOutcome) -> GateOutcome:
    """Log the gate's figures to the active run and tag the version with the decision."""
    from mlflow.tracking import MlflowClient

    mlflow.log_metrics({f"gate.candidate.{k}": v for k, v in outcome.candidate.items()})
    mlflow.log_metrics({f"gate.champion.{k}": v for k, v in (outcome.champion or {}).items()})
    client = MlflowClient()
    client.set_model_version_tag(name, version, f"{GATE_TAG}decision", outcome.decision)
    client.set_model_version_tag(name, version, f"{GATE_TAG}reason", outcome.reason[:500])
    return outcome
