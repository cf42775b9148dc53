"""The settings a whole job shares (`pipeline`, `retrain`), and the stage configs derived from them.

    kernelwright pipeline --max-steps 50 --weighting plain     # JobConfig's fields, as PipelineConfig
    kernelwright retrain --max-steps 50 --weighting plain      # the same fields, as RetrainConfig's first ones

`JobConfig` holds each shared setting once; `PipelineConfig` and `RetrainConfig` extend it. The
stage configs a job runs are made here only (`curate_config`, `train_config`, `evaluate_config`),
so both jobs train and evaluate by the same rules (LoRA merged at the end, a checkpoint every
third of the steps unless `save_steps` says otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelwright.curation.config import CurateConfig
from kernelwright.evaluation.config import EvaluateConfig
from kernelwright.training.config import WEIGHTINGS, TrainConfig
from kernelwright.workdir import TRACKING_URI_HELP


@dataclass
class JobConfig:
    """What every whole job sets: where it works, the base, the training run and the held-out sampling."""

    workdir: str | None = field(default=None, metadata={"help": "Work folder. None: ./.kernelwright."})
    tracking_uri: str | None = field(default=None, metadata={"help": TRACKING_URI_HELP})
    base_model: str | None = field(default=None, metadata={"help": "Local HF checkpoint. None: the tiny model."})
    base_max_steps: int = field(default=0, metadata={
        "help": "Pretrain the tiny default base (no --base-model) for exactly this many optimizer steps, so that "
                "a busy machine and an idle one pretrain it on the same tokens (1,500 steps took 5.5 minutes on a "
                "busy 2-core machine). 0: as many steps as its 3-minute budget allows, which follows the machine "
                "and its load (758 to 5,450 steps seen on 2-core machines)."})
    weighting: str = field(default="plain", metadata={"help": "Loss weighting: plain, token, region or cuset "
                                                               "(plain by measurement: docs/cuset.md)."})
    max_steps: int = field(default=300, metadata={"help": "Training steps."})
    per_device_train_batch_size: int = field(default=2, metadata={"help": "Samples per micro-batch."})
    learning_rate: float = field(default=2e-3, metadata={"help": "Peak learning rate."})
    max_length: int = field(default=2048, metadata={"help": "Training sequence length cap, in tokens."})
    lora: bool = field(default=False, metadata={"help": "LoRA (merged at the end) instead of full fine-tuning."})
    save_steps: int = field(default=0, metadata={"help": "Checkpoint every N steps; 0: max_steps / 3."})
    samples: int = field(default=1, metadata={"help": "Completions per held-out problem."})
    max_new_tokens: int = field(default=2048, metadata={
        "help": "Generation budget per completion, in tokens. 2048 holds 97%% of the synthesized solutions and "
                "99%% of the seed solutions in the `small` base's tokens (whole kernels; 384 held none)."})
    seed: int = field(default=0, metadata={"help": "Seed of training and sampling."})

    def __post_init__(self) -> None:
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, not {self.weighting!r}")
        if self.max_steps <= 0 or self.samples < 1 or self.save_steps < 0:
            raise ValueError("need max_steps >= 1, samples >= 1 and save_steps >= 0")
        if self.base_max_steps < 0:
            raise ValueError(f"base_max_steps must be 0 (the base's minutes decide) or more, not {self.base_max_steps}")
        if self.base_max_steps and self.base_model:
            raise ValueError("base_max_steps sets how long the default base pretrains; with base_model there is none "
                             "to pretrain: pass one of the two")


@dataclass
class PipelineConfig(JobConfig):
    """Config of `kernelwright pipeline`: the knobs worth turning for a whole run (`JobConfig`'s), and
    synthesized training data beside them."""

    synth_tasks: int = field(default=0, metadata={
        "help": "Procedural tasks to synthesize first (`kernelwright synthesize`: verified where there is a GPU, "
                "else written unverified and said so) and train on instead of the seed training split; their "
                "held-out compositions are evaluated too (`evaluate_compositions`); pairs longer than "
                "--max-length are dropped, not cut. 0: none, the seed corpus. "
                "The measured CPU recipe: --synth_tasks 2000 --synth_families elementwise --max_steps 2000 "
                "--max_length 3072 --max_new_tokens 2600 (docs/results)."})
    synth_families: list[str] = field(default_factory=list, metadata={
        "help": "Task families to synthesize (elementwise, reduction, softmax, rownorm, gather, matmul_epilogue); "
                "repeatable. Empty: all of them.", "action": "extend"})
    synth_eval_problems: int = field(default=12, metadata={
        "help": "Held-out compositions evaluated, taken in turn from each family; 0: all of them."})
    synth_with_seed: bool = field(default=False, metadata={
        "help": "With --synth_tasks: the seed corpus's training split beside the synthesized pairs (its held-out "
                "tasks stay out). On the tiny base it kept the seed tasks but no composition compiled (docs/results). "
                "Off: the synthesized pairs alone."})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.synth_tasks < 0 or self.synth_eval_problems < 0:
            raise ValueError("need synth_tasks >= 0 and synth_eval_problems >= 0")
        if self.synth_with_seed and not self.synth_tasks:
            raise ValueError("synth_with_seed needs synth_tasks: without them the seed training split is the data "
                             "already")

    def stages(self) -> list[str]:
        """The child runs this job makes, in order."""
        synth = self.synth_tasks > 0
        return [*(["base-model"] if self.base_max_steps else []), *(["synthesize"] if synth else []), "curate",
                "train", "evaluate",
                *(["evaluate_compositions"] if synth else [])]


def curate_config(job: JobConfig, workdir: Path, **extra: Any) -> CurateConfig:
    """The curate stage of a job: the seed corpus's train split unless `extra` names inputs."""
    return CurateConfig(**{"split": "train", "base_model": job.base_model, "workdir": str(workdir), **extra})


def train_config(job: JobConfig, workdir: Path, data: Path | None, **extra: Any) -> TrainConfig:
    """The train stage of a job on the curated `data`."""
    return TrainConfig(**{
        "data": str(data) if data else None, "base_model": job.base_model, "weighting": job.weighting,
        "max_steps": job.max_steps, "per_device_train_batch_size": job.per_device_train_batch_size,
        "learning_rate": job.learning_rate, "max_length": job.max_length, "lora": job.lora,
        "merge_lora": job.lora, "seed": job.seed, "save_steps": job.save_steps or max(job.max_steps // 3, 1),
        "workdir": str(workdir), **extra})


def evaluate_config(job: JobConfig, workdir: Path, model: str, **extra: Any) -> EvaluateConfig:
    """The evaluate stage of a job on `model` (a folder or a registry URI)."""
    return EvaluateConfig(**{"model": model, "samples": job.samples, "max_new_tokens": job.max_new_tokens,
                             "seed": job.seed, "workdir": str(workdir), **extra})
