"""Config of `kernelwright evaluate`: one field per setting, with its units and off-value."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelwright.evaluation.candidates import BUILTIN
from kernelwright.loop_limits import LOOP_TEST
from kernelwright.verifier.ray_fanout import DEFAULT_GPU_FRACTION, GPU_FRACTION_HELP, RAY_HELP, check_gpu_fraction
from kernelwright.workdir import TRACKING_URI_HELP


@dataclass
class EvaluateConfig:
    """Config of `kernelwright evaluate`."""

    model: str | None = field(default=None, metadata={
        "help": "Local HF checkpoint or registry URI (models:/NAME@ALIAS, models:/NAME/VERSION). "
                "None: <workdir>/train/final. With --generations it only names the model for the gate."})
    suite: str | None = field(default=None, metadata={
        "help": f"KernelBench-style problem folder, '{BUILTIN}' for kernelwright's suite, 'synth:heldout' for "
                "the synthesized held-out problems (<workdir>/synthesize/heldout) or 'infill:heldout' for their "
                "infill tasks (<workdir>/synthesize/infill/heldout, figures per region kind as infill.<kind>.*). "
                "None: the seed corpus tasks of --split."})
    generations: str | None = field(default=None, metadata={
        "help": "Folder of candidate files (<problem_id>/sample_<k>.py or <problem_id>.py) to verify "
                "instead of generating."})
    generate_only: bool = field(default=False, metadata={
        "help": "Write the candidates to <out>/generations with how they were sampled (generation.json) and "
                "stop before any check; check them later with --generations. Off: generate and check."})
    split: str = field(default="test", metadata={"help": "Seed tasks when no --suite: test (held-out) or all."})
    samples: int = field(default=1, metadata={"help": "Candidates per problem."})
    max_new_tokens: int = field(default=2048, metadata={
        "help": "Generation budget per completion, in tokens. 2048 holds 97%% of the synthesized solutions and "
                "99%% of the seed solutions in the `small` base's tokens (whole kernels; 384 held none)."})
    temperature: float = field(default=0.0, metadata={"help": "Sampling temperature; 0: greedy."})
    stop_loops: bool = field(default=True, metadata={
        "help": f"End a completion once {LOOP_TEST} (a repetition "
                "loop, which can only run to the budget and fail to parse) instead of at the budget; off: "
                "every completion runs to its end-of-sequence token or the budget."})
    static_cache: bool = field(default=False, metadata={
        "help": "Generate with a static KV cache, whose decoding step transformers compiles on a GPU (~31 s at the "
                "first call; a call of new shapes may compile again) to cut the host's work per token: 0.22x the "
                "dynamic cache's time a token on an H100 (bench/decode_speed.py); in bfloat16 the tokens may differ. "
                "Off: the dynamic cache, nothing compiled."})
    batch_size: int = field(default=8, metadata={"help": "Prompts per generate() call."})
    heldout_nll: bool = field(default=True, metadata={
        "help": "Also score the seed corpus's 13 held-out answers by teacher forcing under the model when "
                "generating (heldout_bits_per_char: one forward pass each); off: skip it (a large model on a CPU)."})
    seed: int = field(default=0, metadata={"help": "Sampling seed."})
    jobs: int = field(default=0, metadata={
        "help": "Verification workers on this machine (builds run in parallel); 0: one per core. With --ray the "
                "cluster's GPUs decide."})
    ray: str | None = field(default=None, metadata={"help": RAY_HELP})
    ray_gpu_fraction: float = field(default=DEFAULT_GPU_FRACTION, metadata={"help": GPU_FRACTION_HELP})
    timeout_s: float = field(default=300.0, metadata={"help": "Wall-clock limit per candidate, build included."})
    verify_seeds: int = field(default=2, metadata={"help": "Seeds per input distribution in the correctness check."})
    timing_budget_s: float = field(default=1.0, metadata={"help": "Seconds of timed trials per model and shape."})
    split_build: bool = field(default=True, metadata={
        "help": "Split build of candidates' kernels (see `kernelwright verify --help`); off: build as written."})
    compile_baseline: bool = field(default=True, metadata={"help": "Also time torch.compile of the reference."})
    own_kernel_share: float = field(default=0.9, metadata={
        "help": "Share of device time (0-1) a correct candidate's own kernels must take to count in the "
                "own-kernel view (own.fast_0, own.fast_1, ...); 0: every correct candidate counts."})
    gate_view: str = field(default="own", metadata={
        "help": "Figures the gate compares: own (own-kernel view) or any (KernelBench's: any mix of own "
                "kernels and PyTorch)."})
    gate: bool = field(default=True, metadata={
        "help": "Tag a registered model with its figures and move `champion` when it wins; off: report only."})
    out: str | None = field(default=None, metadata={"help": "Results folder. None: <workdir>/evaluate."})
    workdir: str | None = field(default=None, metadata={"help": "Work folder. None: ./.kernelwright."})
    tracking_uri: str | None = field(default=None, metadata={"help": TRACKING_URI_HELP})

    def __post_init__(self) -> None:
        if self.split not in ("test", "all"):
            raise ValueError(f"split must be test or all, not {self.split!r}")
        if self.samples < 1:
            raise ValueError("samples must be at least 1")
        if self.batch_size < 1 or self.max_new_tokens < 1:
            raise ValueError("batch_size and max_new_tokens must be at least 1")
        if self.verify_seeds < 1:  # no seed: no correctness check, every candidate would pass
            raise ValueError(f"verify_seeds must be at least 1, not {self.verify_seeds}")
        if not self.timeout_s > 0 or not self.timing_budget_s >= 0:  # NaN too
            raise ValueError("timeout_s must be positive and timing_budget_s 0 or more")
        if not self.temperature >= 0.0:  # NaN too
            raise ValueError(f"temperature must be 0 (greedy) or more, not {self.temperature}")
        if self.jobs < 0:
            raise ValueError("jobs must be 0 (one per core) or more")
        if self.gate_view not in ("own", "any"):
            raise ValueError(f"gate_view must be own or any, not {self.gate_view!r}")
        if not 0.0 <= self.own_kernel_share <= 1.0:
            raise ValueError("own_kernel_share is a share of device time, between 0 and 1")
        check_gpu_fraction(self.ray_gpu_fraction)
        if self.generate_only and self.generations:
            raise ValueError("--generate-only makes candidates; --generations reads them: pass one of the two")
