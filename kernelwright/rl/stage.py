"""The rl stage: GRPO (TRL) with the judge as the reward, infill tasks first, then whole problems.

    kernelwright rl                                   # the champion, on <workdir>/synthesize
    kernelwright rl --model models:/kernelwright-coder@candidate --steps 400 --infill-steps 100
    kernelwright rl --model /models/my-sft --data /data/synth --num-generations 8 --beta 0.04
    kernelwright rl --eval-items 16 --eval-steps 5    # 16 items a phase set aside, judged every 5 steps

Each step samples `num_generations` completions for each of `prompts_per_step` prompts of the
curriculum (curriculum.py), writes them as candidates, judges them (judging.py: on this machine's
GPU, or static checks and NVRTC without one, the params' `reward_mode` says which) and trains
on the rewards (reward.py). One MLflow run per job: every config value (`kw.*`), the reward mode,
per-step reward parts, verdict reasons, cheat rate and KL, a samples table every
`samples_every` steps; checkpoints every `save_steps`. Run the same command again after a kill and
it continues from the last checkpoint into the same run. The final model is written to
`<out>/final` and registered (alias `candidate`), to be evaluated and gated like any version.
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import mlflow
import torch
from datasets import Dataset
from mlflow.tracking import MlflowClient
from transformers import PreTrainedTokenizerBase, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from kernelwright import atomic, jsontext
from kernelwright.checkpoints import RUN_ID_FILE, RunIdInCheckpoints, TimeLimit
from kernelwright.code_state import tag_code_state
from kernelwright.config import config_to_params
from kernelwright.errors import UsageError
from kernelwright.generation import end_loops_with_eos
from kernelwright.model_card import log_local_model, write_model_card
from kernelwright.models import load_base_model, load_model, load_tokenizer, resolve_ref
from kernelwright.rl.config import RLConfig
from kernelwright.rl.curriculum import INFILL, Curriculum, RLItem, curriculum_items, load_curriculum, rows, set_aside
from kernelwright.rl.curves import report
from kernelwright.rl.early_judge import EarlyJudge, judge_rows_as_they_end
from kernelwright.rl.judge_reward import JudgeReward
from kernelwright.rl.judging import Judge, pick_judge, reward_mode
from kernelwright.rl.resume import checkpoint_to_resume, out_dir, resumable_run_id
from kernelwright.store import Store
from kernelwright.tracking import log_config, set_alias, tracking_session
from kernelwright.workdir import resolve_workdir

log = logging.getLogger(__name__)
CHAMPION = "champion"
START_DIR, SOURCE_FILE = "start", "kernelwright.json"  # a registry policy saved locally, and where it came from
INJECTED = "injected"  # the reward mode of a run given its judge by the caller (tests)


@dataclass(frozen=True)
class RLResult:
    model_dir: Path
    run_id: str | None
    registered_version: str | None
    reward_mode: str
    global_step: int  # steps trained in all, those before a resume included
    resumed_from: str | None
    completions: int  # completions rewarded by this process (after a resume: since it)
    cheat_rate: float  # share of those with a cheat reason
    correct_rate: float
    mean_reward: float
    reasons: dict[str, int]
    train_runtime_s: float
    reward_s: float  # seconds spent in the reward (writing, judging, scoring)
    stopped_by_time: bool = False  # --max-minutes ended the run before --steps


def data_dir(cfg: RLConfig) -> Path:
    """The synthesized data: --data, else <workdir>/synthesize."""
    return Path(cfg.data) if cfg.data else resolve_workdir(cfg.workdir) / "synthesize"


@dataclass(frozen=True)
class RLPlan:
    """What a job trains and evaluates on, read and checked once before a model or an MLflow store is touched:
    the curriculum less the set-aside items, those items, the training rows' items and the checkpoint to resume."""

    curriculum: Curriculum
    aside: list[RLItem]
    items: list[RLItem]
    last_checkpoint: str | None


def plan_rl(cfg: RLConfig) -> RLPlan:
    """The job's plan (RLPlan); a UsageError for what cannot run (more than one process, no data, a phase with
    steps and no items, checkpoints that --resume false would mix with new ones)."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise UsageError("kernelwright rl runs in one process (generation, judging and training on one device)")
    curriculum, aside = set_aside(load_curriculum(data_dir(cfg)), cfg)
    return RLPlan(curriculum, aside, curriculum_items(curriculum, cfg), checkpoint_to_resume(cfg))


def policy_source(cfg: RLConfig) -> str:
    return cfg.model or f"models:/{cfg.registered_model}@{CHAMPION}"


def load_policy(cfg: RLConfig, out: Path, resuming: bool) -> tuple[Any, PreTrainedTokenizerBase, str]:
    """The starting policy, its tokenizer (pad token and chat template set where it has none) and where it came
    from. A registry version is first saved to `<out>/start`, a folder the reference model of the KL term is
    loaded from too (TRL reloads it from the policy's path); a resumed run keeps the policy it started from there,
    wherever the alias points now."""
    start = out / START_DIR
    if resuming and (start / "config.json").is_file():
        path, source = start, _read_source(start)
    else:
        ref = resolve_ref(policy_source(cfg))
        path, source = Path(ref.uri), ref.uri
        if ref.version is not None:
            model, tokenizer = load_model(ref)

            def fill(tmp: Path) -> None:
                model.save_pretrained(tmp)
                tokenizer.save_pretrained(tmp)
                (tmp / SOURCE_FILE).write_text(json.dumps({"source": ref.uri}))

            atomic.write_dir(start, fill)
            del model
            path = start
    if not (path / "config.json").is_file():
        raise UsageError(f"no model at {path}: pass --model with a Hugging Face checkpoint folder or "
                         "models:/NAME@ALIAS")
    return load_base_model(path), load_tokenizer(path), source


def _read_source(start: Path) -> str:
    try:
        return str(jsontext.loads((start / SOURCE_FILE).read_text())["source"])
    except (OSError, ValueError, KeyError, TypeError):
        return str(start)


def grpo_args(cfg: RLConfig, out: Path, evaluate: bool = False, resuming: bool = False) -> GRPOConfig:
    """TRL's config of the run; `evaluate`: set-aside items are judged before the first step (not again on a
    resume) and every `eval_steps` steps, in batches of eval_batch_size(cfg) completions."""
    on_gpu = torch.cuda.is_available()
    bf16 = cfg.bf16 if cfg.bf16 is not None else on_gpu and torch.cuda.is_bf16_supported()
    checkpointing = cfg.gradient_checkpointing if cfg.gradient_checkpointing is not None else on_gpu
    names = {f.name for f in fields(GRPOConfig)}  # transformers >= 5.2x renamed gradient_ to activation_checkpointing
    return GRPOConfig(
        output_dir=str(out), max_steps=cfg.steps, learning_rate=cfg.learning_rate,
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps, num_generations=cfg.num_generations,
        max_completion_length=cfg.max_completion_length, temperature=cfg.temperature, beta=cfg.beta,
        loss_type=cfg.loss_type, logging_steps=cfg.logging_steps, save_steps=cfg.save_steps, save_total_limit=2,
        seed=cfg.seed, bf16=bf16, fp16=False, use_cpu=not on_gpu, report_to=[],  # MlflowMetrics logs to the active run
        shuffle_dataset=False,  # the curriculum's order: phase 1 first (curriculum.py)
        log_completions=False, dataloader_num_workers=0, disable_tqdm=False,
        **{n: checkpointing for n in ("gradient_checkpointing", "activation_checkpointing") if n in names},
        **({"eval_strategy": "steps", "eval_steps": cfg.eval_steps, "eval_on_start": not resuming,
            "per_device_eval_batch_size": eval_batch_size(cfg)} if evaluate else {}),
    )


def eval_batch_size(cfg: RLConfig) -> int:
    """Completions generated at once for the set-aside items: as many as one optimizer step generates (its prompts'
    groups, so the same generation memory). A training micro-batch's worth instead took 4 generate calls where a
    step takes one: on an H100, beside the evaluations, the first evaluation of 12 items ran 43-71 s a prompt."""
    return cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps


class CardedGRPOTrainer(GRPOTrainer):
    """TRL's GRPOTrainer leaving kernelwright's card in its output folder, not TRL's hub draft (model_card.py),
    and telling `early` (where set) which dataset rows each generation's completions answer."""

    early: EarlyJudge | None = None

    def create_model_card(self, *args: Any, **kwargs: Any) -> None:
        write_model_card(self, "rl")

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if self.early is not None:
            self.early.expect(inputs)  # one row per completion, in the order TRL generates them
        return super()._generate_and_score_completions(inputs)


class MlflowMetrics(TrainerCallback):
    """Every number the trainer logs (TRL's loss, kl, reward, and the reward function's parts) as an MLflow metric
    of the active run at the global step."""

    def on_log(self, args, state, control, logs=None, **kwargs):  # type: ignore[no-untyped-def]
        if not state.is_world_process_zero or mlflow.active_run() is None:
            return
        numbers = {k.replace("(", "_").replace(")", "_"): float(v) for k, v in (logs or {}).items()
                   if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)}
        if numbers:
            mlflow.log_metrics(numbers, step=state.global_step)


def log_params_once(params: dict[str, str]) -> None:
    """Log params to the active run; one a resumed run already holds with another value (e.g. more --steps)
    keeps its first value, and the new one becomes tag `kw.resumed_with.<key>`."""
    run = mlflow.active_run()
    if run is None:
        return
    held = MlflowClient().get_run(run.info.run_id).data.params
    mlflow.log_params({k: v for k, v in params.items() if k not in held})
    changed = {f"kw.resumed_with.{k}": v for k, v in params.items() if k in held and held[k] != v}
    if changed:
        mlflow.set_tags(changed)


def run_rl(cfg: RLConfig, judge: Judge | None = None, plan: RLPlan | None = None) -> RLResult:
    """Train with GRPO; inside an active MLflow run, log everything to it and register the model. `judge`
    replaces the configured judge (the reward mode is then `injected`); `plan`, the job's plan where the caller
    made it (else it is made here)."""
    plan = plan or plan_rl(cfg)
    curriculum, aside, items, last = plan.curriculum, plan.aside, plan.items, plan.last_checkpoint
    out = out_dir(cfg)
    mode = INJECTED if judge is not None else reward_mode(cfg)
    judge = judge or pick_judge(cfg)
    model, tokenizer, source = load_policy(cfg, out, resuming=last is not None)
    if cfg.stop_loops and tokenizer.eos_token_id is not None:
        end_loops_with_eos(model, int(tokenizer.eos_token_id))
    out.mkdir(parents=True, exist_ok=True)
    run = mlflow.active_run()
    time_limit = TimeLimit(cfg.max_minutes * 60)
    callbacks: list[TrainerCallback] = [time_limit]
    if run is not None:
        atomic.write_text(out / RUN_ID_FILE, run.info.run_id)
        log_params_once({**config_to_params(cfg, "kw."), "reward_mode": mode, "kw.policy": source,
                         "rl.infill_items": str(len(curriculum.infill)), "rl.whole_items": str(len(curriculum.whole)),
                         "rl.heldout_dropped": str(len(curriculum.dropped)),
                         "rl.prompts_per_step": str(cfg.prompts_per_step), "rl.eval_items_in_all": str(len(aside))})
        log_config(cfg, "rl")
        mlflow.set_tags({"kw.method": "grpo", "kw.resumed_from": str(last)})
        mlflow.log_dict({"phase1_steps": cfg.phase1_steps, "phase2_steps": cfg.steps - cfg.phase1_steps,
                         "phase1": sorted({it.id for it in items if it.phase == INFILL}),
                         "phase2": sorted({it.id for it in items if it.phase != INFILL}),
                         "eval": sorted(it.id for it in aside), "dropped": curriculum.dropped}, "curriculum.json")
        callbacks += [MlflowMetrics(), RunIdInCheckpoints(run.info.run_id)]
    reward = JudgeReward(judge, cfg.weights(), out / "candidates", correctness_only=cfg.correctness_only,
                         samples_every=cfg.samples_every)
    trainer = CardedGRPOTrainer(model=model, reward_funcs=reward,
                                args=grpo_args(cfg, out, bool(aside), last is not None),
                                train_dataset=Dataset.from_list(rows(items)), processing_class=tokenizer,
                                eval_dataset=Dataset.from_list(rows(aside)) if aside else None, callbacks=callbacks)
    reward.is_training = lambda: bool(trainer.model.training)
    early = judging_early(cfg, model, tokenizer, judge, out)
    reward.early = trainer.early = early
    try:
        result = trainer.train(resume_from_checkpoint=last)
        evaluate_last(trainer, aside)  # it generates too: the early judge stays open through it
    finally:
        if early is not None:
            early.close()
    final = save_final(trainer.model, tokenizer, out / "final")
    stats = reward.stats
    summary = {"rl/cheat_rate_final": stats.cheat_rate, "rl/completions": float(stats.completions),
               "rl/reward_s_total": stats.reward_s}
    version = None
    if run is not None:
        mlflow.log_metrics(summary, step=trainer.state.global_step)
        if time_limit.stopped_at_step is not None:
            mlflow.set_tag("kw.stopped_by_time", f"max_minutes {cfg.max_minutes:g} ended it after step "
                                                 f"{time_limit.stopped_at_step} of {cfg.steps}")
        version = register(cfg, final, tokenizer, mode) if cfg.register else None
        log_curves(run.info.run_id, out)
    return RLResult(model_dir=out / "final", run_id=run.info.run_id if run else None, registered_version=version,
                    reward_mode=mode, global_step=trainer.state.global_step, resumed_from=last,
                    completions=stats.completions, cheat_rate=stats.cheat_rate,
                    correct_rate=stats.correct / stats.completions if stats.completions else 0.0,
                    mean_reward=stats.reward_sum / stats.completions if stats.completions else 0.0,
                    reasons=dict(stats.reasons), train_runtime_s=float(result.metrics.get("train_runtime", 0.0)),
                    reward_s=stats.reward_s, stopped_by_time=time_limit.stopped_at_step is not None)


def judging_early(cfg: RLConfig, model: Any, tokenizer: PreTrainedTokenizerBase, judge: Judge,
                  out: Path) -> EarlyJudge | None:
    """The early judge of `judge_while_generating` (early_judge.py), its rows reported by `model.generate`."""
    eos = [t for t in (tokenizer.eos_token_id, *_ids(getattr(model.generation_config, "eos_token_id", None)))
           if t is not None]
    if not cfg.judge_while_generating or not eos:
        return None
    early = EarlyJudge(judge, out / "candidates", lambda ids: str(tokenizer.decode(ids, skip_special_tokens=True)),
                       eos, batch=cfg.verify_jobs)
    judge_rows_as_they_end(model, early)
    return early


def _ids(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def evaluate_last(trainer: GRPOTrainer, aside: list[RLItem]) -> None:
    """The set-aside items judged after the last step too, where nothing did (the trainer evaluates at the last of
    --steps, not where --max-minutes ended the run between two evaluations)."""
    step = trainer.state.global_step
    if aside and not any("eval_loss" in h and h.get("step") == step for h in trainer.state.log_history):
        trainer.evaluate()


def log_curves(run_id: str, out: Path) -> None:
    """The run's curves (curves.py) as `rl_curves.png` and their summary as `rl_curves.json` in the run."""
    summary = report(MlflowClient(), run_id, out / "rl_curves.png")
    mlflow.log_artifact(str(out / "rl_curves.png"))
    mlflow.log_dict({k: v for k, v in summary.items() if k != "series"}, "rl_curves.json")


def save_final(model: Any, tokenizer: PreTrainedTokenizerBase, dest: Path) -> Any:
    """The trained policy and its tokenizer written to `dest` as a whole; the model, for registration."""

    def fill(tmp: Path) -> None:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "kernelwright.json").write_text(json.dumps({"trained_by": "kernelwright rl", "method": "grpo"}))

    atomic.write_dir(dest, fill)
    return model


def register(cfg: RLConfig, model: Any, tokenizer: PreTrainedTokenizerBase, mode: str) -> str | None:
    """Log the model to the active run and register it; the version gets tags `method` and `reward_mode`, and
    alias `cfg.alias`."""
    info = log_local_model({"model": model, "tokenizer": tokenizer}, "rl", registered_model_name=cfg.registered_model,
                           pip_requirements=["kernelwright", "torch", "transformers"])
    version = getattr(info, "registered_model_version", None)
    if version is None:
        return None
    client = MlflowClient()
    client.set_model_version_tag(cfg.registered_model, str(version), "method", "grpo")
    client.set_model_version_tag(cfg.registered_model, str(version), "reward_mode", mode)
    mlflow.set_tag("kw.registered_version", str(version))
    if cfg.alias:
        set_alias(str(version), cfg.alias, cfg.registered_model)
    return str(version)


def rl_command(cfg: RLConfig, judge: Judge | None = None) -> RLResult:
    """What `kernelwright rl` runs: the arguments and data checked, then the MLflow store (--tracking-uri, else the
    work folder's), one run (resumed when a previous run into the same output folder was killed and the store
    holds it). `judge`: as for `run_rl`."""
    plan = plan_rl(cfg)
    with tracking_session(Store.of(cfg)):
        run_id = resumable_run_id(cfg)
        with mlflow.start_run(run_id=run_id, run_name=None if run_id else "rl",
                              tags=None if run_id else {"kernelwright.stage": "rl"},
                              log_system_metrics=cfg.system_metrics):
            tag_code_state()
            return run_rl(cfg, judge, plan)
