"""The judge's spec file and its progress/state file, shared by the parent and the judge.

- `Spec`: what SPEC.json holds (the problem, the candidate, the result file, the protocol options),
  written by the parent (verify.py) and read by the judge process (judge.py);
- `Progress`: the judge's state file (the result file, which finally holds the verdict): the
  current phase and the seconds spent in each.

Kept apart from the judge so that nothing imports the judge itself: under
`python -m kernelwright.verifier.judge` that would load a second copy beside the one running.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwright import atomic


@dataclass
class Spec:
    problem: str
    candidate: str
    result: str
    seeds: tuple[int, ...] = (0, 1)
    timing_seed: int = 7000  # first seed of the timed calls' fresh inputs (the judge draws it per run)
    timing: bool = True
    compile_baseline: bool = True
    min_trials: int = 10
    max_trials: int = 100
    timing_budget_s: float = 1.0
    build_cache: str | None = None
    timing_lock: str | None = None
    memory_fraction: float = 0.5
    min_custom_share: float = 0.1  # least share of GPU kernel time in the candidate's kernels, else fallback_runtime
    peak_flops: dict[str, float] | None = None
    peak_bytes_per_s: float = 4.3e12
    launch_floor_ms: float = 0.002
    ref_timing_cache: bool = True
    split_build: bool = True  # device code built without torch headers (split_build.py), else as written
    pch_lock: str | None = None  # the parent's precompiled-header build to wait for (pch.py); None: none
    slim_header: bool = True  # a split build's host file after a smaller precompiled header (slim_header.py)
    generic_bindings: bool = True  # ... the bare one, with the generic bindings linked in (host_bindings.py)
    blocking_gpu_wait: bool = True  # sleep while waiting for the GPU outside the timing lock (gpu_wait.py)
    gpu_gate: bool = False  # no other candidate's correctness step on the GPU while one is timed (gpu_gate.py)
    profiler_warm_up: bool = True  # the profiler's first session during the build (profiler_started_alongside)
    decoy_check: bool = True  # the output with the candidate's own launches skipped must be wrong (fallback_decoy)
    forkserver: str | None = None  # socket of the fork server that starts the runner (forkserver.py); None: Popen
    runner_user: list[Any] | None = None  # [uid, gid, name] the runner runs as (sandbox.runner_user); None: the judge's
    timer_bound: bool = True  # the timer held to the judge's clock (timing_inconsistent, capped speedup)
    gpu_ledger: str | None = None  # the GPU-memory ledger this candidate was admitted by (admission.py); None: none
    ledger_token: str | None = None  # this candidate's entry in it
    gpu_inputs: bool = True  # inputs made on the GPU with CUDA's generator (inputs.draw_on_gpu), else on the host
    held_timed_outputs: bool = True  # the trials' outputs held with their sums, a few read back (held_outputs.py)
    early_stop_clock: bool = True  # the clock's rounds end once the timer is within its bound (timing.settled)
    cpu_profile: str | None = None  # folder for the judge's and the runner's cProfile files (cpu_profile.py); None: off


class Progress:
    """The worker's state file: the current phase (what a timeout or crash reports), the seconds
    spent in each phase so far (`phase_s`), and the CPU seconds of each phase: the judge's own
    (`judge_phase_cpu_s`) and, once `runner_cpu` is set, the runner's with its finished compilers
    (`runner_phase_cpu_s`; a figure that went down, the runner being gone, adds nothing)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.state: dict[str, Any] = {"phase": "start", "phase_s": {}, "judge_phase_cpu_s": {},
                                      "runner_phase_cpu_s": {}}
        self.runner_cpu: Callable[[], float] | None = None  # the runner's CPU seconds so far
        self._since = time.perf_counter()
        self._judge_cpu = time.process_time()
        self._runner_cpu = 0.0

    def write(self, **fields: Any) -> None:
        if "phase" in fields:
            phase = self.state["phase"]
            now, judge_cpu = time.perf_counter(), time.process_time()
            _add(self.state["phase_s"], phase, now - self._since)
            _add(self.state["judge_phase_cpu_s"], phase, judge_cpu - self._judge_cpu)
            self._since, self._judge_cpu = now, judge_cpu
            if self.runner_cpu is not None and (runner_cpu := self.runner_cpu()) >= self._runner_cpu:
                _add(self.state["runner_phase_cpu_s"], phase, runner_cpu - self._runner_cpu)
                self._runner_cpu = runner_cpu
        self.state.update(fields)
        atomic.write_text(self.path, json.dumps(self.state, default=str))


def _add(spent: dict[str, float], phase: str, seconds: float) -> None:
    spent[phase] = spent.get(phase, 0.0) + seconds
