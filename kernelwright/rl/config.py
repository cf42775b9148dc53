"""Config of `kernelwright rl`: one field per setting, with its units and off-value."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelwright.errors import UsageError
from kernelwright.infill_format import REGION_KINDS
from kernelwright.loop_limits import LOOP_TEST
from kernelwright.rl.reward import (
    CHEAT_PENALTY,
    COMPILE,
    CORRECT,
    FORMAT,
    OWN_SHARE,
    SPEED,
    SPEED_LOG2_MAX,
    SPEED_LOG2_MIN,
    RewardWeights,
)
from kernelwright.tracking import REGISTERED_MODEL
from kernelwright.workdir import TRACKING_URI_HELP

REWARD_MODES = ("auto", "gpu_judge", "nvrtc_static")
LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo")


@dataclass
class RLConfig:
    """Config of `kernelwright rl`."""

    model: str | None = field(default=None, metadata={
        "help": "Policy to start from: a Hugging Face checkpoint folder or a registry URI (models:/NAME@ALIAS, "
                "models:/NAME/VERSION). None: the champion (models:/<registered_model>@champion)."})
    data: str | None = field(default=None, metadata={
        "help": "A `kernelwright synthesize` output folder (train/, infill/train/; its held-out parts are never "
                "trained on). None: <workdir>/synthesize."})
    steps: int = field(default=200, metadata={"help": "Optimizer steps in all, both phases."})
    max_minutes: float = field(default=0.0, metadata={
        "help": "Wall-clock minutes of training in this process (the evaluations of --eval-items within them: it "
                "boxes the job's time), after which it stops at the end of the step in progress and checkpoints, "
                "saves, registers and logs as a finished run does (a later call with the same --out resumes from "
                "there); the infill phase comes first, so a short budget may never reach "
                "whole problems. 0: no limit, --steps decides."})
    infill_steps: int | None = field(default=None, metadata={
        "help": "Steps of phase 1 (infill tasks: complete a hidden region of a verified kernel); the rest are phase 2 "
                "(whole problems). None: half of --steps; 0: no infill phase."})
    infill_kinds: list[str] = field(default_factory=list, metadata={
        "help": f"Infill region kinds phase 1 draws from ({', '.join(REGION_KINDS)}); empty: every kind. The "
                "small SFT model filled 10-11 of 14 held-out launch_config holes and 0 of 3 smem_tiling ones: "
                "a group of completions on a kind it nearly always or never solves shares one reward and has "
                "no advantage to learn from."})
    items_per_phase: int | None = field(default=None, metadata={
        "help": "Training items each phase draws once (by --seed) and cycles through; None: every item. A pool "
                "smaller than the phase's prompts recurs, so a short run's reward follows the same prompts "
                "(learning) rather than which prompts each step drew."})
    eval_items: int = field(default=0, metadata={
        "help": "Training items of each phase that has steps (infill ones of --infill-kinds) set aside before the "
                "pools are drawn, the same for every --seed: never trained on, nor any item of their tasks. They "
                "are judged, --num-generations completions each, before the first step, every --eval-steps steps "
                "and after the last, and their reward and rates logged as `eval_reward/total`, "
                "`eval_rl/correct_rate`, ...: whether what the policy learns carries to prompts it did not see. "
                "0: no evaluation."})
    eval_steps: int = field(default=5, metadata={
        "help": "Optimizer steps between two evaluations of the set-aside items (with --eval-items)."})
    num_generations: int = field(default=8, metadata={
        "help": "Completions sampled per prompt (the GRPO group); at least 2."})
    per_device_train_batch_size: int = field(default=8, metadata={
        "help": "Completions per micro-batch; with gradient accumulation a multiple of --num-generations."})
    gradient_accumulation_steps: int = field(default=1, metadata={"help": "Micro-batches per optimizer step."})
    learning_rate: float = field(default=1e-6, metadata={"help": "Peak learning rate (linear decay)."})
    beta: float = field(default=0.04, metadata={
        "help": "KL coefficient against the starting policy; 0: no KL term and no reference model."})
    loss_type: str = field(default="dapo", metadata={"help": f"GRPO loss aggregation: {', '.join(LOSS_TYPES)}."})
    max_completion_length: int = field(default=2048, metadata={
        "help": "Most tokens generated per completion: whole kernels need the evaluation's budget (2048 holds 97%% "
                "of the synthesized solutions in the `small` base's tokens)."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature of the completions (> 0)."})
    stop_loops: bool = field(default=True, metadata={
        "help": f"End a rollout caught in a repetition loop ({LOOP_TEST}) with "
                "the end-of-sequence token instead of at max_completion_length, which a loop can only reach to "
                "fail to parse while it holds its whole generation batch. false: rollouts run to their end."})
    reward_format: float = field(default=FORMAT, metadata={
        "help": "Reward of an answer whose code is in a fenced block, whatever the judge says (not for a rejected "
                "one); 0: off, so code that does not build earns nothing."})
    reward_compile: float = field(default=COMPILE, metadata={
        "help": "Reward of a candidate that was built (or, without a GPU, passed NVRTC) but is not correct."})
    reward_correct: float = field(default=CORRECT, metadata={"help": "Reward added for a correct candidate."})
    reward_speed: float = field(default=SPEED, metadata={
        "help": "Weight of the clipped log2 speedup of a correct candidate in the own-kernel view; 0: off."})
    speed_log2_min: float = field(default=SPEED_LOG2_MIN, metadata={"help": "Lower clip of log2 speedup (<= 0)."})
    speed_log2_max: float = field(default=SPEED_LOG2_MAX, metadata={"help": "Upper clip of log2 speedup (>= 0)."})
    own_kernel_share: float = field(default=OWN_SHARE, metadata={
        "help": "Least share of device time, 0 to 1, in the candidate's own kernels for the speed term to count."})
    cheat_penalty: float = field(default=CHEAT_PENALTY, metadata={
        "help": "Reward of a verdict with a cheat reason (<= 0; 0: nothing, never a positive reward)."})
    correctness_only: bool = field(default=False, metadata={
        "help": "Drop the speed term: reward compiling and correctness only (the judge still times every "
                "candidate: its fallback_runtime and result_caching checks need the timed runs)."})
    reward_mode: str = field(default="auto", metadata={
        "help": "gpu_judge (verify every candidate on this machine's GPU), nvrtc_static (static checks, NVRTC and "
                "the host compile only: the compile part, for a machine without a GPU) or auto (gpu_judge with a "
                "CUDA device)."})
    verify_jobs: int = field(default=8, metadata={"help": "Candidates verified at once."})
    judge_while_generating: bool = field(default=True, metadata={
        "help": "Send a completion to the judge as soon as its row ends, in batches of verify_jobs, while the "
                "step's other rows still generate (rl/early_judge.py; rl/judged_early: the share judged so). "
                "The judge's runs then share the GPU with generation (its contention handling applies). False: "
                "the step's completions are judged once all are generated."})
    verify_timeout_s: float = field(default=300.0, metadata={
        "help": "Wall-clock limit per candidate's verification, build included, in seconds."})
    timing_budget_s: float = field(default=0.25, metadata={
        "help": "Seconds of timed trials per model and shape (at least 10 trials either way) for the speed part. "
                "Every candidate's timing holds the judge's timing lock, and the reward needs a clipped ratio, not "
                "evaluation's figure (1.0 s there): on an H100 the judge took 227 of a 325 s step at 1.0 s."})
    samples_every: int = field(default=10, metadata={
        "help": "Log a table of prompts, completions, verdicts and rewards every N steps; 0: never."})
    logging_steps: int = field(default=1, metadata={"help": "Log metrics every N steps."})
    save_steps: int = field(default=25, metadata={"help": "Checkpoint every N steps (for resume)."})
    bf16: bool | None = field(default=None, metadata={
        "help": "bfloat16 autocast. None: on with a bf16-capable GPU, off on a CPU."})
    gradient_checkpointing: bool | None = field(default=None, metadata={
        "help": "Recompute activations in the backward (less memory). None: on with a GPU, off on a CPU."})
    out: str | None = field(default=None, metadata={"help": "Checkpoints and final model. None: <workdir>/rl."})
    workdir: str | None = field(default=None, metadata={"help": "Work folder. None: ./.kernelwright."})
    tracking_uri: str | None = field(default=None, metadata={"help": TRACKING_URI_HELP})
    seed: int = field(default=0, metadata={"help": "Seed of the task order, sampling and initialisation."})
    resume: bool = field(default=True, metadata={
        "help": "Continue from the last checkpoint in --out (into the same MLflow run). Off: refuse an --out that "
                "holds checkpoints."})
    register: bool = field(default=True, metadata={"help": "Register the final model in the MLflow registry."})
    registered_model: str = field(default=REGISTERED_MODEL, metadata={"help": "Registered model name."})
    alias: str | None = field(default="candidate", metadata={"help": "Alias given to the new version; empty: none."})
    system_metrics: bool = field(default=True, metadata={
        "help": "Log CPU, memory, disk (and GPU with nvidia-ml-py) use to MLflow every 10 s."})

    def __post_init__(self) -> None:
        if self.steps <= 0:
            raise UsageError(f"steps must be positive, not {self.steps}")
        if not 0.0 < self.learning_rate < float("inf"):  # NaN too
            raise UsageError(f"learning_rate must be a positive number, not {self.learning_rate}")
        if not self.max_minutes >= 0:  # NaN too
            raise UsageError(f"max_minutes must be 0 (no limit) or more minutes, not {self.max_minutes}")
        if self.infill_steps is not None and not 0 <= self.infill_steps <= self.steps:
            raise UsageError(f"infill_steps must be within 0 and steps ({self.steps}), not {self.infill_steps}")
        unknown = [k for k in self.infill_kinds if k not in REGION_KINDS]
        if unknown:
            raise UsageError(f"infill_kinds: unknown region kind(s) {', '.join(unknown)}; the kinds are "
                             f"{', '.join(REGION_KINDS)}")
        if self.items_per_phase is not None and self.items_per_phase <= 0:
            raise UsageError(f"items_per_phase must be positive (or unset: every item), not {self.items_per_phase}")
        if self.eval_items < 0 or self.eval_steps <= 0:
            raise UsageError(f"eval_items must be 0 (no evaluation) or more and eval_steps positive, not "
                             f"{self.eval_items} and {self.eval_steps}")
        if self.num_generations < 2:
            raise UsageError("num_generations must be at least 2 (GRPO compares completions of one prompt)")
        batch = self.per_device_train_batch_size * self.gradient_accumulation_steps
        if self.per_device_train_batch_size <= 0 or self.gradient_accumulation_steps <= 0 or \
                batch % self.num_generations:
            raise UsageError(f"per_device_train_batch_size x gradient_accumulation_steps ({batch}) must be a positive "
                             f"multiple of num_generations ({self.num_generations})")
        if self.beta < 0:
            raise UsageError(f"beta (the KL coefficient) must be >= 0, not {self.beta}")
        if self.loss_type not in LOSS_TYPES:
            raise UsageError(f"loss_type must be one of {', '.join(LOSS_TYPES)}, not {self.loss_type!r}")
        if self.reward_mode not in REWARD_MODES:
            raise UsageError(f"reward_mode must be one of {', '.join(REWARD_MODES)}, not {self.reward_mode!r}")
        if self.max_completion_length <= 0 or not self.temperature > 0:
            raise UsageError("max_completion_length and temperature must be positive")
        if self.verify_jobs <= 0 or not self.verify_timeout_s > 0:
            raise UsageError("verify_jobs and verify_timeout_s must be positive")
        if not self.timing_budget_s >= 0:  # NaN too
            raise UsageError(f"timing_budget_s must be 0 or more seconds, not {self.timing_budget_s}")
        if self.samples_every < 0 or self.logging_steps <= 0 or self.save_steps <= 0:
            raise UsageError("logging_steps and save_steps must be positive, samples_every >= 0")
        self.weights()  # the reward weights are checked too

    @property
    def phase1_steps(self) -> int:
        """Steps of the infill phase."""
        return self.steps // 2 if self.infill_steps is None else self.infill_steps

    @property
    def prompts_per_step(self) -> int:
        """Distinct prompts per optimizer step (each sampled num_generations times)."""
        return self.per_device_train_batch_size * self.gradient_accumulation_steps // self.num_generations

    def weights(self) -> RewardWeights:
        return RewardWeights(format=self.reward_format, compile=self.reward_compile, correct=self.reward_correct,
                             speed=self.reward_speed, speed_log2_min=self.speed_log2_min,
                             speed_log2_max=self.speed_log2_max, own_share=self.own_kernel_share,
                             cheat_penalty=self.cheat_penalty)
