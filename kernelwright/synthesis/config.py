"""Config of `kernelwright synthesize`: one field per setting, with its units and off-value."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelwright.synthesis.task import FAMILIES
from kernelwright.workdir import TRACKING_URI_HELP

VERIFY_MODES = ("auto", "gpu", "none")


@dataclass
class SynthesizeConfig:
    """Config of `kernelwright synthesize`."""

    tasks: int = field(default=2000, metadata={"help": "Procedural tasks to draw (before the split and the checks)."})
    seed: int = field(default=0, metadata={"help": "Generator seed: task i is drawn from (seed, i) alone."})
    families: list[str] = field(default_factory=list, metadata={
        "help": f"Task families to draw from ({', '.join(FAMILIES)}); repeatable. Empty: all of them.",
        "action": "extend"})
    heldout_share: float = field(default=0.15, metadata={
        "help": "Share (0-1) of composition signatures held out for evaluation (synth:heldout); 0: none."})
    verify: str = field(default="auto", metadata={
        "help": "auto: verify on this machine's GPU when there is one, else write the pairs unverified and say so; "
                "gpu: a GPU is required; none: write unverified pairs (curation refuses them unless "
                "--allow-unverified)."})
    jobs: int = field(default=0, metadata={"help": "Worker processes of the GPU checks (builds in parallel); "
                                                   "0: one per core, at most 16."})
    chunk: int = field(default=0, metadata={
        "help": "Solutions built into one extension by a worker; 0: about three chunks per worker, 16-128 each."})
    time_share: float = field(default=0.1, metadata={
        "help": "Share (0-1) of the verified tasks that are also timed (speedup, kernel share, roofline); 0: none."})
    min_speedup: float = field(default=0.0, metadata={
        "help": "Keep only pairs at least this much faster than the reference (DICE-style; needs --time-share 1). "
                "0: off."})
    infill: bool = field(default=True, metadata={
        "help": "Also write infill tasks (one CUDA-critical region hidden) from the correct solutions; off: none."})
    teacher: str | None = field(default=None, metadata={
        "help": "Base URL of an OpenAI-compatible engine (kernelwright serve, vLLM, SGLang): write k candidates "
                "per problem of --teacher-problems, keep the best correct one. None: off."})
    teacher_problems: str | None = field(default=None, metadata={
        "help": "Problem folder for --teacher (KernelBench-style), 'builtin', or 'synth' (the held-in procedural "
                "tasks of this run). None: synth."})
    teacher_model: str = field(default="", metadata={"help": "Model id the teacher serves; '': the first it lists."})
    teacher_k: int = field(default=4, metadata={"help": "Candidates per problem from the teacher."})
    teacher_temperature: float = field(default=0.7, metadata={"help": "Teacher sampling temperature."})
    teacher_max_tokens: int = field(default=2048, metadata={"help": "Teacher generation budget, in tokens."})
    decontaminate_against: list[str] = field(default_factory=list, metadata={
        "help": "More evaluation problem folders to decontaminate against (13-gram and signature level); "
                "the held-out seed tasks and the builtin suite always are. Repeatable.", "action": "extend"})
    decontam_ngram: int = field(default=13, metadata={"help": "Decontamination n-gram length, in code tokens."})
    decontam_min_share: float = field(default=0.5, metadata={
        "help": "A task is contaminated when more than this share of a problem's n-grams occur in it."})
    out: str | None = field(default=None, metadata={"help": "Output folder. None: <workdir>/synthesize."})
    workdir: str | None = field(default=None, metadata={"help": "Work folder. None: ./.kernelwright."})
    tracking_uri: str | None = field(default=None, metadata={"help": TRACKING_URI_HELP})

    def __post_init__(self) -> None:
        if self.tasks < 1:
            raise ValueError(f"tasks must be at least 1, not {self.tasks}")
        if not 0.0 <= self.heldout_share < 1.0:
            raise ValueError(f"heldout_share must be in [0, 1), not {self.heldout_share}")
        if not 0.0 <= self.time_share <= 1.0:
            raise ValueError(f"time_share must be in [0, 1], not {self.time_share}")
        if self.verify not in VERIFY_MODES:
            raise ValueError(f"verify must be one of {', '.join(VERIFY_MODES)}, not {self.verify!r}")
        if self.chunk < 0 or self.jobs < 0 or self.teacher_k < 1:
            raise ValueError("need chunk >= 0, jobs >= 0 and teacher_k >= 1")
        if self.min_speedup < 0:
            raise ValueError(f"min_speedup must be >= 0, not {self.min_speedup}")
        if self.min_speedup > 0 and self.time_share < 1.0:
            raise ValueError("--min-speedup needs every pair timed: set --time-share 1")
