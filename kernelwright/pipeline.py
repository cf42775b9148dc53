"""The whole job on the embedded defaults: curate -> train -> evaluate, one MLflow parent run.

    kernelwright pipeline                      # seed corpus, tiny local model, ./.kernelwright
    kernelwright pipeline --max-steps 50 --workdir /tmp/kw
    kernelwright pipeline --synth-tasks 2000 --synth-families elementwise --max-steps 2000 \
        --max-length 3072 --max-new-tokens 2600    # synthesized pairs, held-out compositions evaluated

Each stage is a child run (`curate`, `train`, `evaluate`) of a `pipeline` parent run; the
trained model becomes a new version of `kernelwright-coder` with alias `candidate`. With
`--synth-tasks N` a `synthesize` run comes first, training takes its pairs instead of the seed
training split, and an `evaluate_compositions` run checks the model on the first
`--synth-eval-problems` held-out compositions (no gate: the seed evaluation gates as before).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import mlflow

from kernelwright import jsontext
from kernelwright.base_model.choose import check_base_model, with_pinned_base
from kernelwright.base_model.pretrain import read_meta
from kernelwright.config import config_to_params
from kernelwright.curation.stage import run_curate
from kernelwright.errors import UsageError
from kernelwright.evaluation.stage import EvaluateResult, run_evaluate
from kernelwright.job_config import PipelineConfig, curate_config, evaluate_config, train_config
from kernelwright.store import Store
from kernelwright.synthesis.config import SynthesizeConfig
from kernelwright.synthesis.stage import run_synthesize
from kernelwright.tracking import REGISTERED_MODEL, log_config, stage_run, tracking_session
from kernelwright.training.stage import run_train

log = logging.getLogger(__name__)


@dataclass
class PipelineResult:
    run_id: str
    tracking_uri: str
    registered_model: str
    version: str | None
    wall_s: float
    evaluation: EvaluateResult
    base_heldout_bits_per_char: float | None = None  # the base's, as its pretraining measured it; None: unknown
    compositions: EvaluateResult | None = None  # the held-out compositions' (with --synth-tasks); None: not run

    @property
    def metrics(self) -> dict[str, float]:
        return self.evaluation.metrics


def run_pipeline(cfg: PipelineConfig, on_stage: Callable[[str], None] = lambda name: None) -> PipelineResult:
    """Run the stages (`cfg.stages()`); `on_stage(name)` is called as each one starts (for progress output)."""
    check_base_model(cfg.base_model)  # before the MLflow store is touched
    store = Store.of(cfg)
    with tracking_session(store):
        return _run(cfg, store, on_stage)


def _run(cfg: PipelineConfig, store: Store, on_stage: Callable[[str], None]) -> PipelineResult:
    start = time.perf_counter()
    workdir = store.workdir
    with stage_run("pipeline") as parent:
        mlflow.log_params(config_to_params(cfg, "pipeline."))
        log_config(cfg, "pipeline")
        if cfg.base_max_steps:
            on_stage("base-model")
            cfg = with_pinned_base(cfg, workdir)
        synthesized: tuple[Path, Path] | None = None
        curate_extra: dict[str, object] = {}
        if cfg.synth_tasks > 0:
            on_stage("synthesize")
            with stage_run("synthesize"):
                synthesized = synthesize(cfg, workdir)
            # longer pairs are dropped rather than cut by training: a cut solution never ends
            curate_extra = {"input": [str(synthesized[0])], "allow_unverified": True, "max_length": cfg.max_length,
                            "with_seed_split": cfg.synth_with_seed}
        on_stage("curate")
        with stage_run("curate"):
            data_dir = run_curate(curate_config(cfg, workdir, **curate_extra))
        on_stage("train")
        with stage_run("train"):
            trained = run_train(train_config(cfg, workdir, data_dir))
        on_stage("evaluate")
        with stage_run("evaluate"):
            registered = f"models:/{REGISTERED_MODEL}/{trained.registered_version}"
            model = registered if trained.registered_version else str(trained.model_dir)
            evaluation = run_evaluate(evaluate_config(cfg, workdir, model))
        compositions = None
        if synthesized is not None:
            on_stage("evaluate_compositions")
            with stage_run("evaluate_compositions"):
                compositions = run_evaluate(evaluate_config(
                    cfg, workdir, model, suite=str(synthesized[1]), gate=False,
                    out=str(workdir / "evaluate_compositions")))
        wall = time.perf_counter() - start
        base_bpc = base_heldout_figure(trained.base_dir)
        learned = {"pipeline.base_heldout_bits_per_char": base_bpc} if base_bpc is not None else {}
        mlflow.log_metrics({"pipeline.wall_s": wall, "train.final_loss": trained.train_loss, **learned})
        if trained.registered_version:
            mlflow.set_tag("registered_version", trained.registered_version)
    return PipelineResult(run_id=parent.info.run_id, tracking_uri=store.tracking_uri,
                          registered_model=REGISTERED_MODEL, version=trained.registered_version,
                          wall_s=wall, evaluation=evaluation, base_heldout_bits_per_char=base_bpc,
                          compositions=compositions)


def synthesize(cfg: PipelineConfig, workdir: Path) -> tuple[Path, Path]:
    """Synthesize `cfg.synth_tasks` tasks; (their training pairs, a folder of the held-out compositions
    to evaluate). Unverified pairs (no GPU here) are kept by curation, as `synthesize` said."""
    result = run_synthesize(SynthesizeConfig(tasks=cfg.synth_tasks, seed=cfg.seed, families=list(cfg.synth_families),
                                             infill=False, workdir=str(workdir)))
    if not result.verified:
        log.warning("the synthesized pairs are not verified on a GPU (none here): training on them as written")
    return result.out / "train", heldout_slice(result.out / "heldout", workdir / "synthesize-eval",
                                               cfg.synth_eval_problems)


def heldout_slice(heldout: Path, out: Path, limit: int) -> Path:
    """`out` holding the first `limit` held-out problems (0: all), taken in turn from each family's
    folder so that every family is in a short slice; written afresh each run."""
    families = sorted(p for p in heldout.iterdir() if p.is_dir()) if heldout.is_dir() else []
    queues = [sorted(f.glob("*.py")) for f in families]
    chosen: list[Path] = []
    for rank in range(max((len(q) for q in queues), default=0)):
        chosen += [q[rank] for q in queues if rank < len(q)]
    chosen = chosen[:limit] if limit else chosen
    if not chosen:
        raise UsageError(f"no held-out compositions were synthesized in {heldout} (raise --synth-tasks)")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for path in chosen:
        shutil.copy2(path, out / path.name)
    return out


def base_heldout_figure(base: Path | None) -> float | None:
    """The seed held-out answers' bits per character under the base, from the record its pretraining left
    (`base-model pretrain` measures it); None for a base without one (a user's checkpoint)."""
    meta = read_meta(base) if base is not None else None
    heldout = (meta or {}).get("heldout")
    return jsontext.number(heldout.get("bits_per_char")) if isinstance(heldout, dict) else None
