"""`kernelwright retrain`: one idempotent, crash-safe curate -> train -> evaluate -> gate job.

    kernelwright retrain                                   # seed corpus, tiny model, ./.kernelwright
    kernelwright retrain --config retrain.yaml --input data/new.jsonl --margin 0.02
    kernelwright retrain --lock-uri postgresql://kw@db/mlflow --tracking-uri http://mlflow:5000
    kernelwright retrain --ray auto                        # the gate's verification on a Ray cluster

Under the retrain lock (lock.py), the watermark (watermark.py) is computed first: when a finished
retrain has the same one in the same evaluation scope, a `skipped` run is recorded and nothing else
happens. Otherwise one `retrain` parent run holds the stages as child runs (`curate`, `train`,
`evaluate`, `evaluate[champion]`) and ends with tags `kw.retrain.decision` (promoted, rejected,
not_gated) and `kw.retrain.reason`. A run killed at any point is resumed by the next one with the
same inputs: the same parent run, stage outputs found by their digests (stages.py), training from
its last checkpoint into its MLflow run; the aliases move only at the very end (champion.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import mlflow
from mlflow.entities import Run
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from kernelwright import atomic
from kernelwright.base_model.choose import resolve_base_model, with_pinned_base
from kernelwright.code_state import tag_code_state
from kernelwright.config import config_to_params
from kernelwright.curation.stage import check_curate_config
from kernelwright.evaluation.candidates import select_problems
from kernelwright.evaluation.checking import Verifier
from kernelwright.evaluation.registry import CHAMPION, alias_version, eval_scope, sampling_scope
from kernelwright.evaluation.stage import suite_id
from kernelwright.retrain.champion import SKIPPED, GateOutcome, GateScope, run_gate
from kernelwright.retrain.config import RetrainConfig
from kernelwright.retrain.lock import retrain_lock
from kernelwright.retrain.stages import (
    CURATE_PATHS,
    TRAIN_PATHS,
    curate_config,
    curate_step,
    prune_checkpoints,
    retrain_root,
    settings_of,
    train_config,
    train_step,
)
from kernelwright.retrain.watermark import TAG, Watermark, compute_watermark, digest_settings
from kernelwright.seed import seed_root
from kernelwright.store import Store
from kernelwright.tracking import EXPERIMENT, log_config, tracking_session
from kernelwright.verifier.ray_fanout import import_ray

log = logging.getLogger(__name__)


@dataclass
class RetrainResult:
    run_id: str
    decision: str  # promoted, rejected, not_gated or skipped
    reason: str
    watermark: str
    candidate_version: str | None
    champion_version: str | None  # where `champion` points after the run
    wall_s: float
    candidate: dict[str, float] = field(default_factory=dict)  # the candidate's gate figures


def run_retrain(cfg: RetrainConfig, verifier: Verifier | None = None,
                on_stage: Callable[[str], None] = lambda name: None) -> RetrainResult:
    """The whole job (see the module doc); `on_stage(name)` is called as each step starts. `verifier` None:
    the evaluate stage's own (worker processes here, or Ray tasks with --ray)."""
    check_curate_config(curate_config(cfg, Path(".")))  # bad input is refused before any store is touched
    if cfg.ray:
        import_ray()
    store = Store.of(cfg)
    workdir = store.workdir
    problems = select_problems(cfg.suite, "test", workdir)
    with retrain_lock(cfg.lock_uri, workdir, store.tracking_uri, cfg.registered_model) as held, \
            tracking_session(store):
        log.info("retrain holds the %s", held)
        start = time.perf_counter()
        on_stage("watermark")
        cfg = with_pinned_base(cfg, workdir)
        mark = watermark_of(cfg, workdir)
        figures = eval_scope(suite_id(problems, cfg.samples), sampling_scope(cfg.temperature, cfg.max_new_tokens))
        key = digest_settings({**figures, "view": cfg.gate_view})
        scope = GateScope(figures, key, retrain_root(workdir) / f"evaluate-{key}")
        done = finished_run(mark, key)
        if done is not None:
            return _skipped(cfg, mark, key, done, start)
        return _retrain(cfg, workdir, mark, scope, verifier, on_stage, start)


def watermark_of(cfg: RetrainConfig, workdir: Path) -> Watermark:
    base = resolve_base_model(cfg.base_model, workdir)  # the tiny model is built here on first use
    inputs = [Path(p) for p in cfg.input] or [seed_root()]
    return compute_watermark(inputs, settings_of(curate_config(cfg, workdir), CURATE_PATHS),
                             settings_of(train_config(cfg, workdir), TRAIN_PATHS), base,
                             workdir / "cache" / "digests.json")


def _search(mark: Watermark, extra: str = "") -> list[Run]:
    exp = mlflow.get_experiment_by_name(EXPERIMENT)
    if exp is None:
        return []
    query = f"tags.`{TAG}watermark` = '{mark.key}' and attributes.status = 'FINISHED'{extra}"
    return MlflowClient().search_runs([exp.experiment_id], filter_string=query,
                                      order_by=["attributes.start_time DESC"], max_results=50)


def finished_run(mark: Watermark, scope_key: str) -> Run | None:
    """A finished (not skipped) retrain with this watermark in this evaluation scope."""
    runs = _search(mark, f" and tags.`{TAG}scope` = '{scope_key}' and tags.`{TAG}decision` != '{SKIPPED}'")
    return runs[0] if runs else None


def trained_before(cfg: RetrainConfig, mark: Watermark) -> str | None:
    """The candidate version a finished retrain with the same watermark (another scope) trained."""
    client = MlflowClient()
    for run in _search(mark):
        version = run.data.tags.get(f"{TAG}candidate_version")
        if version:
            try:
                client.get_model_version(cfg.registered_model, version)
                return version
            except MlflowException:
                continue
    return None


def _skipped(cfg: RetrainConfig, mark: Watermark, scope_key: str, done: Run, start: float) -> RetrainResult:
    decision = done.data.tags.get(f"{TAG}decision", "?")
    reason = f"nothing new: retrain run {done.info.run_id} ({decision}) had the same inputs and evaluation scope"
    tags = {"kernelwright.stage": "retrain", **mark.tags(), f"{TAG}scope": scope_key,
            f"{TAG}decision": SKIPPED, f"{TAG}reason": reason, f"{TAG}same_as": done.info.run_id}
    with mlflow.start_run(run_name="retrain", tags=tags) as run:
        tag_code_state()
    log.info("retrain skipped: %s", reason)
    return RetrainResult(run.info.run_id, SKIPPED, reason, mark.key, done.data.tags.get(f"{TAG}candidate_version"),
                         alias_version(cfg.registered_model, CHAMPION), time.perf_counter() - start)


def _state_file(workdir: Path, mark: Watermark, scope_key: str) -> Path:
    return retrain_root(workdir) / f"run-{mark.key}-{scope_key}.json"


def _resumable_parent(state: Path) -> str | None:
    """The parent run of an earlier, unfinished attempt with the same inputs, if the store holds it."""
    try:
        run_id = Path(state).read_text().strip()
        run = MlflowClient().get_run(run_id)
    except (OSError, MlflowException):
        return None
    return run_id if run.info.lifecycle_stage == "active" and run.info.status != "FINISHED" else None


def _retrain(cfg: RetrainConfig, workdir: Path, mark: Watermark, scope: GateScope, verifier: Verifier | None,
             on_stage: Callable[[str], None], start: float) -> RetrainResult:
    state = _state_file(workdir, mark, scope.key)
    resumed = _resumable_parent(state)
    tags = {"kernelwright.stage": "retrain", **mark.tags(), f"{TAG}scope": scope.key,
            f"{TAG}registered_model": cfg.registered_model}
    with mlflow.start_run(run_id=resumed, run_name=None if resumed else "retrain",
                          tags=None if resumed else tags) as parent:
        atomic.write_text(state, parent.info.run_id)
        tag_code_state()
        if resumed:
            mlflow.set_tag(f"{TAG}resumed", "true")
            log.info("resuming retrain run %s", resumed)
        else:
            mlflow.log_params(config_to_params(cfg, "retrain."))
            log_config(cfg, "retrain")
        version = _candidate(cfg, workdir, mark, on_stage)
        on_stage("gate")
        outcome = run_gate(cfg, version, scope, verifier)
        champion = alias_version(cfg.registered_model, CHAMPION)
        _record(outcome, version, champion, time.perf_counter() - start)
    prune_checkpoints(workdir, cfg.keep_checkpoints)
    return RetrainResult(parent.info.run_id, outcome.decision, outcome.reason, mark.key, version, champion,
                         time.perf_counter() - start, outcome.candidate)


def _candidate(cfg: RetrainConfig, workdir: Path, mark: Watermark, on_stage: Callable[[str], None]) -> str:
    """The candidate version: trained before with the same watermark, or curated and trained now."""
    earlier = trained_before(cfg, mark)
    if earlier is not None:
        log.info("v%s was trained from the same inputs: evaluated again, not retrained", earlier)
        mlflow.set_tag(f"{TAG}reused_version", earlier)
        return earlier
    on_stage("curate")
    data = curate_step(cfg, workdir, mark)
    on_stage("train")
    return train_step(cfg, workdir, mark, data)


def _record(outcome: GateOutcome, version: str, champion: str | None, wall_s: float) -> None:
    mlflow.set_tags({f"{TAG}decision": outcome.decision, f"{TAG}reason": outcome.reason[:500],
                     f"{TAG}candidate_version": version, f"{TAG}champion_before": str(outcome.champion_before),
                     f"{TAG}champion_version": str(champion)})
    mlflow.log_metric("retrain.wall_s", wall_s)
    log.info("retrain %s: v%s %s (%s); champion is v%s", mlflow.active_run().info.run_id,  # type: ignore[union-attr]
             version, outcome.decision, outcome.reason, champion)
