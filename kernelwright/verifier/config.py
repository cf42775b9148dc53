"""Config of `kernelwright verify` (and of every verification evaluate runs): one field per setting, with units."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class VerifyConfig:
    """Config of `kernelwright verify`."""

    problem: str = field(default="", metadata={"help": "KernelBench-style problem file (Model, get_inputs, ...)."})
    candidate: str = field(default="", metadata={"help": "Candidate file defining ModelNew."})
    json: str | None = field(default=None, metadata={"help": "Write the verdict as JSON here."})
    static: bool = field(default=False, metadata={"help": "Static checks only (any machine, no GPU)."})
    timeout_s: float = field(default=300.0, metadata={"help": "Wall-clock limit of the worker, build included."})
    seeds: int = field(default=2, metadata={"help": "Seeds per input distribution."})
    timing: bool = field(default=True, metadata={"help": "Time candidate and reference; off: correctness only."})
    compile_baseline: bool = field(default=True, metadata={"help": "Also time torch.compile of the reference."})
    memory_fraction: float = field(default=0.5, metadata={"help": "Share of GPU memory the worker may allocate."})
    timing_budget_s: float = field(default=1.0, metadata={"help": "Seconds of timed trials per model and shape."})
    min_custom_share: float = field(default=0.1, metadata={
        "help": "Least share of the forward's GPU kernel time, 0 to 1, spent in the candidate's own kernels on "
                "every shape; below it: fallback_runtime. 0: no share required (the share is still reported)."})
    build_cache: str | None = field(
        default=None, metadata={"help": "Folder the judge alone writes: cached reference timings (candidates build "
                                        "in their runner's scratch folder). None: ~/.cache/kernelwright/builds."}
    )
    host_memory_gb: float = field(default=32.0, metadata={
        "help": "Resident host memory a worker may use, in GiB, before it is killed (out_of_memory); 0: no limit."})
    split_build: bool = field(default=True, metadata={
        "help": "Build a candidate's kernels without torch headers and its host wrappers with the precompiled "
                "header (same kernels, ~4x less compile time); anything the split does not cover is built as "
                "written. Off: always as written."})
    slim_header: bool = field(default=True, metadata={
        "help": "In a split build, compile the host file after the smallest precompiled header that serves it "
                "(cuda/slim_header.py): torch/types.h alone with kernelwright's generic bindings linked in "
                "where the functions' signatures allow (cuda/host_bindings.py; see generic_bindings), else "
                "torch/types.h and torch/python.h, else torch/extension.h; each failure falls back to the "
                "next. Off: torch/extension.h."})
    generic_bindings: bool = field(default=True, metadata={
        "help": "With slim_header: bind a split build's host functions with kernelwright's generic bindings "
                "object, so the host file holds no pybind11 and reads torch/types.h alone (~2 CPU-s a "
                "candidate instead of ~4.7 after torch/types.h and torch/python.h). Off: the bindings "
                "load_inline writes, after the slim header."})
    blocking_gpu_wait: bool = field(default=True, metadata={
        "help": "Judges and runners sleep while they wait for the GPU outside the timing lock and spin under it "
                "(verifier/gpu_wait.py): a core is not burnt for every wait behind other candidates' work. Off: "
                "CUDA's own choice throughout (a spinning wait on a host of many cores)."})
    gpu_gate: bool = field(default=False, metadata={
        "help": "While a candidate is timed, other candidates' correctness steps wait instead of sharing the "
                "GPU with its clock and trials (verifier/gpu_gate.py): timings without their time slices, at the "
                "cost of the correctness work that waits. Off: only timings exclude one another."})
    profiler_warm_up: bool = field(default=True, metadata={
        "help": "Start the profiler (CUPTI, ~4.6 s on an H200) in a thread while the candidate builds; off: at "
                "the first shape's kernel-share pass."})
    forkserver: bool = field(default=True, metadata={
        "help": "With several candidates, fork their judges and runners from one process that has imported torch "
                "once (verifier/forkserver.py) instead of starting Python for each; off: a fresh Python each."})
    ref_timing_cache: bool = field(default=True, metadata={
        "help": "Reuse reference timings of the same problem, shape, GPU and torch (kept in the build cache); "
                "off: time the reference for every candidate."})
    timer_bound: bool = field(default=True, metadata={
        "help": "Hold the candidate's timer to the judge's own clock: below what it allows on every attempt is "
                "timing_inconsistent, and no speedup exceeds what it supports. Off only to calibrate the bound "
                "(bench/timer_bound_calibration.py): the timer's figures are then reported unchecked."})
    nvrtc_gate: bool = field(default=True, metadata={
        "help": "No build for a candidate whose device code NVRTC rejected where that rejection stands for nvcc's "
                "(verifier/nvrtc_gate.py): compile_error with NVRTC's log. Off: every candidate is built."})
    gpu_inputs: bool = field(default=True, metadata={
        "help": "Make every draw's inputs on the GPU with CUDA's generator (verifier/inputs.py); off: on the host "
                "with the CPU's, then copied (judges before version 21), a few CPU-s a candidate more."})
    held_timed_outputs: bool = field(default=True, metadata={
        "help": "The runner holds every timed trial's output on the GPU with its sum, and the judge reads back the "
                "8 it chooses after the trials ran, as its clock does (verifier/held_outputs.py): less written and "
                "read, and fewer checked against the reference (judge version 22: 1.07x the candidates verified "
                "an hour on an H100, every fixture's verdict unchanged). Off: every timed output is written and "
                "read back under the timing lock (judges before 22)."})
    early_stop_clock: bool = field(default=True, metadata={
        "help": "The judge's clock ends its rounds (CLOCK_BATCHES, the lowest estimate counts) at the first after "
                "which the timer reads within its bound and not disturbed: later rounds could only lower the "
                "estimate, which rejects and caps nothing more (verifier/timing.settled). A timer below the "
                "bound still gets every round (judge version 23: 1.14x the candidates verified an hour on an "
                "H100, every fixture's verdict unchanged). Off: every round runs (judges before 23)."})
    cpu_profile_dir: str | None = field(default=None, metadata={
        "help": "Folder for a cProfile file of every judge and runner process (where a verification's CPU goes; "
                "bench/cpu_profile_summary.py adds them up; the profilers cost CPU too). None: off."})

    def __post_init__(self) -> None:
        if self.seeds < 1:  # no seed: no correctness check at all, so every candidate would pass
            raise ValueError(f"seeds must be at least 1, not {self.seeds}")
        if not self.timeout_s > 0 or not self.timing_budget_s >= 0 or not self.host_memory_gb >= 0:  # NaN too
            raise ValueError("timeout_s must be positive, timing_budget_s and host_memory_gb 0 or more")
        if not 0.0 < self.memory_fraction <= 1.0 or not 0.0 <= self.min_custom_share <= 1.0:
            raise ValueError("memory_fraction must be in (0, 1] and min_custom_share in [0, 1]")

