"""Configs of `kernelwright retrain`, `kernelwright promote` and `kernelwright schedule`."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelwright.job_config import JobConfig
from kernelwright.tracking import REGISTERED_MODEL
from kernelwright.verifier.ray_fanout import DEFAULT_GPU_FRACTION, GPU_FRACTION_HELP, RAY_HELP, check_gpu_fraction
from kernelwright.workdir import TRACKING_URI_HELP


@dataclass
class RetrainConfig(JobConfig):
    """Config of `kernelwright retrain`: the pipeline's knobs (`JobConfig`'s), the corpus, the gate's, and the
    job's safety."""

    input: list[str] = field(default_factory=list, metadata={
        "help": "Corpus files or folders (as `curate --input`); repeatable. Empty: the seed corpus's train split.",
        "action": "extend"})
    map: list[str] = field(default_factory=list, metadata={
        "help": "FIELD=COLUMN pairs for --input (as `curate --map`).", "action": "extend"})
    nvrtc: bool = field(default=True, metadata={"help": "NVRTC-compile each corpus sample in curation; false: skip."})
    keep_checkpoints: int = field(default=1, metadata={
        "help": "Checkpoints kept per training folder once it has finished (the final model is always kept)."})
    suite: str | None = field(default=None, metadata={
        "help": "Problems the gate evaluates on (as `evaluate --suite`). None: the seed corpus's held-out tasks."})
    ray: str | None = field(default=None, metadata={"help": "The gate's verification: " + RAY_HELP})
    ray_gpu_fraction: float = field(default=DEFAULT_GPU_FRACTION, metadata={"help": GPU_FRACTION_HELP})
    temperature: float = field(default=0.0, metadata={
        "help": "Sampling temperature of the gate's completions; 0: greedy (more samples then repeat)."})
    eval_batch_size: int = field(default=8, metadata={"help": "Prompts per generate() call in the gate's evaluations."})
    gate_view: str = field(default="own", metadata={"help": "Figures the gate compares: own or any."})
    margin: float = field(default=0.0, metadata={
        "help": "Least rise of fast_1 (a share of samples, 0-1) that promotes; 0: any rise."})
    registered_model: str = field(default=REGISTERED_MODEL, metadata={"help": "Registered model name."})
    lock_uri: str | None = field(default=None, metadata={
        "help": "Lock against a second retrain: postgresql://... (advisory lock, safe across hosts) or a file path. "
                "None: the tracking store's PostgreSQL if it is one, else <workdir>/retrain.lock."})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.keep_checkpoints < 0:
            raise ValueError("need keep_checkpoints >= 0")
        if self.temperature < 0.0 or self.eval_batch_size < 1:
            raise ValueError("need temperature >= 0 and eval_batch_size >= 1")
        if not 0.0 <= self.margin <= 1.0:
            raise ValueError(f"margin is a share of samples, between 0 and 1, not {self.margin}")
        if self.gate_view not in ("own", "any"):
            raise ValueError(f"gate_view must be own or any, not {self.gate_view!r}")
        check_gpu_fraction(self.ray_gpu_fraction)


@dataclass
class PromoteConfig:
    """Config of `kernelwright promote`: move the `champion` alias by hand."""

    rollback: bool = field(default=False, metadata={
        "help": "Point champion back at previous-champion (and clear previous-champion)."})
    version: str | None = field(default=None, metadata={
        "help": "Make this version the champion (previous-champion is set to the old one)."})
    registered_model: str = field(default=REGISTERED_MODEL, metadata={"help": "Registered model name."})
    workdir: str | None = field(default=None, metadata={"help": "Work folder. None: ./.kernelwright."})
    tracking_uri: str | None = field(default=None, metadata={"help": TRACKING_URI_HELP})

    def __post_init__(self) -> None:
        if self.rollback == (self.version is not None):
            raise ValueError("give exactly one of --rollback and --version N")


@dataclass
class ScheduleConfig:
    """Config of `kernelwright schedule`: run `kernelwright retrain` on a cron schedule, on one host."""

    cron: str = field(default="0 3 * * 0", metadata={
        "help": "Crontab expression (minute hour day month weekday), in --timezone."})
    retrain_config: str | None = field(default=None, metadata={
        "help": "YAML file of `kernelwright retrain` settings for every run. None: the defaults."})
    workdir: str | None = field(default=None, metadata={"help": "Work folder. None: ./.kernelwright."})
    tracking_uri: str | None = field(default=None, metadata={"help": TRACKING_URI_HELP})
    job_store: str | None = field(default=None, metadata={
        "help": "SQLAlchemy URI of the persistent job store. None: sqlite:///<workdir>/schedule.db."})
    timezone: str = field(default="UTC", metadata={"help": "Time zone of the cron expression."})
    misfire_grace_s: int = field(default=7 * 24 * 3600, metadata={
        "help": "A run missed (scheduler down) by up to this many seconds still runs, once; later ones are skipped."})
    run_timeout_s: int = field(default=0, metadata={"help": "Kill a retrain that runs longer than this; 0: no limit."})

    def __post_init__(self) -> None:
        if self.misfire_grace_s < 1 or self.run_timeout_s < 0:
            raise ValueError("need misfire_grace_s >= 1 and run_timeout_s >= 0")
