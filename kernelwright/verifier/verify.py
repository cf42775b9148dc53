"""Verify candidates against problems: static checks here, everything else in a judge process and its runner.
A candidate that calls PyTorch compute, from ModelNew (`fallback_torch_op`, `WARNED_STATIC_REASONS`)
or from its C++/CUDA host code, gets a warning on its verdict and goes on to the GPU run, where the
custom-kernel share of device time decides (under `min_custom_share`: `fallback_runtime`).

    kernelwright verify --problem P.py --candidate C.py [--json OUT] [--static]

Exit status: 0 correct, 1 incorrect or rejected (or any failure of the candidate), 2 bad input,
3 no CUDA device (unless --static).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import IO

from kernelwright import atomic, jsontext
from kernelwright.cuda.pch import header_built_alongside
from kernelwright.cuda.static_checks import StaticReport, check_source
from kernelwright.cuda.torch_calls import scan_candidate
from kernelwright.errors import NoCudaDevice, UsageError
from kernelwright.pysource import compile_python, read_python, source_text, syntax_message
from kernelwright.verifier.admission import (
    GpuMemory,
    Ledger,
    estimate_bytes,
    host_gpu_ledger,
    read_peak,
    visible_gpu,
)
from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.forkserver import ForkServer, Spawned, SpawnRefused, started_server
from kernelwright.verifier.nvrtc_gate import nvrtc_verdict
from kernelwright.verifier.problems import parse_problem_source
from kernelwright.verifier.runner_uid import dedicated_user
from kernelwright.verifier.sandbox import import_roots, plain_env, runner_user
from kernelwright.verifier.spec import Spec
from kernelwright.verifier.verdict import JUDGE_VERSION, MalformedReport, Verdict, parse_report
from kernelwright.verifier.watching import watch


def _default_cache() -> str:
    return str(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kernelwright" / "builds")


def read_inputs(problem: Path, candidate: Path) -> str:
    """Check both files exist and parse; return the candidate's source. Bad input: UsageError."""
    for path, what in ((problem, "problem"), (candidate, "candidate")):
        if not path.is_file():
            found = path.exists()  # a dangling link: not found
            raise UsageError(f"{what} {path} is not a regular file" if found else f"{what} file not found: {path}")
    problem_source = _read(problem, "problem")
    parse_problem_source(problem_source, problem)
    source = _read(candidate, "candidate")
    try:
        compile_python(source, str(candidate))
    except SyntaxError as exc:
        raise UsageError(f"candidate {candidate} is not valid Python ({syntax_message(exc)})") from None
    return source


def _read(path: Path, what: str) -> str:
    """A problem's or candidate's text, decoded as Python decodes it; UsageError when it cannot be."""
    try:
        return read_python(path)
    except SyntaxError as exc:
        raise UsageError(f"{what} {path} is not valid Python ({exc.msg})") from None
    except OSError as exc:
        raise UsageError(f"{what} {path} cannot be read ({exc.strerror or exc})") from None


# Static reasons that `verify` reports as warnings instead of rejections: a candidate may keep some
# PyTorch compute (KernelBench allows replacing only some operators), and on a GPU the run-time
# custom-kernel share decides (`fallback_runtime`). Curation (curation/filters.py) still removes
# them: it reads every reason of `check_source`, not `static_verdict`.
WARNED_STATIC_REASONS = frozenset({"fallback_torch_op"})


def static_verdict(source: str) -> Verdict | None:
    """A rejection from the static checks (with the source's warnings), or None when they pass or
    find only what `WARNED_STATIC_REASONS` makes a warning."""
    report = check_source(source)
    rejections = [r for r in report.reasons if r not in WARNED_STATIC_REASONS]
    if not rejections:
        return None
    detail = "; ".join(d for r in rejections for d in report.by_reason[r])
    return with_warnings(Verdict.of(rejections[0], detail), source_warnings(source))


def source_warnings(source: str) -> list[str]:
    """What the candidate's source says that does not decide its verdict: ModelNew or its C++/CUDA
    host code calls PyTorch compute (on a GPU, the run-time custom-kernel share decides)."""
    lines = [torch_op_warning(check_source(source)), scan_candidate(source).detail]
    return [line for line in lines if line]


def torch_op_warning(report: StaticReport) -> str:
    """One line naming ModelNew's PyTorch compute calls ("" if none), e.g.
    "ModelNew calls PyTorch compute: torch.matmul (line 12)"."""
    calls = [f"{call} (line {line})" for line, call in report.torch_ops]
    return f"ModelNew calls PyTorch compute: {', '.join(calls)}" if calls else ""


def with_warnings(verdict: Verdict, warnings: Sequence[str]) -> Verdict:
    """`verdict`, its warnings extended by those of `warnings` it lacks."""
    verdict.warnings.extend(w for w in warnings if w not in verdict.warnings)
    return verdict


def _candidate_warnings(candidate: str) -> list[str]:
    try:
        return source_warnings(source_text(Path(candidate)))
    except OSError:
        return []


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _phase_and_compile_s(state: dict) -> tuple[str, float | None]:
    """The last phase and build seconds a (possibly tampered) state file gives, as text and a number."""
    compile_s = state.get("compile_s")
    if not isinstance(compile_s, int | float) or isinstance(compile_s, bool):
        compile_s = None
    return str(state.get("phase", "start"))[:80], None if compile_s is None else float(compile_s)


def _death_verdict(returncode: int, state: dict) -> Verdict:
    phase, compile_s = _phase_and_compile_s(state)
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return Verdict.of("crash", f"worker killed by {name} during {phase}", compile_s=compile_s)
    return Verdict.of("exit_called", f"worker exited ({returncode}) during {phase} without a verdict",
                      compile_s=compile_s)


def run_worker(spec: Spec, timeout_s: float, host_memory_gb: float = 0.0,
               server: ForkServer | None = None, memory: GpuMemory | None = None) -> Verdict:
    """Run one judge (forked by `server` when given) once the GPU-memory ledger the spec names admits
    it (admission.py; `memory`: the GPU's, NVML's by default); a hang, crash, early exit or
    host-memory overrun becomes the verdict. A verdict other candidates on the GPU may have caused
    (`_neighbours_may_cause`) is verified again alone, and the verdict says so."""
    if not spec.gpu_ledger:
        return _judge_once(spec, timeout_s, host_memory_gb, server)[0]
    ledger = Ledger(Path(spec.gpu_ledger), memory)
    estimate = estimate_bytes(read_peak(spec.build_cache, spec.problem))
    started = time.perf_counter()
    with ledger.admitted(estimate) as hold:
        waited = time.perf_counter() - started
        spec.ledger_token = hold.token
        verdict, outcome = _judge_once(spec, timeout_s, host_memory_gb, server)
    crowded, first = hold.others, verdict.reason
    if crowded > 0 and _neighbours_may_cause(verdict, outcome):
        started = time.perf_counter()
        with ledger.admitted(estimate_bytes(read_peak(spec.build_cache, spec.problem)), alone=True) as hold:
            waited += time.perf_counter() - started
            spec.ledger_token = hold.token
            verdict, _ = _judge_once(spec, timeout_s, host_memory_gb, server)
        verdict.contention.insert(0, f"{first} while {crowded} other candidate(s) held the GPU: verified again alone")
    verdict.phase_s["gpu_wait"] = waited
    return verdict


def _neighbours_may_cause(verdict: Verdict, outcome: str) -> bool:
    """Whether other candidates on the GPU may have caused the verdict: the GPU's memory ran out
    (not the host's), or the judge's clock read far above the timer (their kernels share the GPU
    with the clock's batches, while their timings do not run beside it)."""
    if verdict.reason == "out_of_memory":
        return outcome != "host_memory"
    return verdict.reason == "timing_inconsistent"


def _judge_once(spec: Spec, timeout_s: float, host_memory_gb: float,
                server: ForkServer | None) -> tuple[Verdict, str]:
    """One judge's verdict, and how its watch ended (`host_memory`: the host's memory, not the GPU's)."""
    with tempfile.TemporaryDirectory(prefix="kw_verify_") as tmp, \
            tempfile.TemporaryFile(prefix="kw_judge_err_") as err_file:
        spec_path = Path(tmp) / "spec.json"
        spec.result = str(Path(tmp) / "result.json")
        spec.forkserver = server.path if server is not None else None
        spec_path.write_text(json.dumps(asdict(spec)))
        started = time.perf_counter()
        proc = _start_judge(spec_path, err_file, server)
        outcome, err = watch(proc, timeout_s, int(host_memory_gb * 2**30), err_file,
                             also=lambda: _outside_pids(Path(spec.result)))
        if isinstance(proc, Spawned):
            proc.close()
        state = _read_state(Path(spec.result))
        verdict = _worker_verdict(outcome, err, state, proc.returncode, timeout_s, host_memory_gb)
        # the worker's own verdict carries its phases; a killed or dead worker's are in its last state
        phases = verdict.phase_s or state.get("phase_s", {})
        verdict.phase_s = {**_numbers(phases), "worker_wall": time.perf_counter() - started}
        verdict.judge_version, verdict.seeds, verdict.timing_seed = JUDGE_VERSION, list(spec.seeds), spec.timing_seed
        return with_warnings(verdict, _candidate_warnings(spec.candidate)), outcome


def _start_judge(spec_path: Path, err: IO[bytes], server: ForkServer | None) -> subprocess.Popen | Spawned:
    """The judge, in a session of its own: forked by the server, or (without one, or if it refuses)
    a new `python -m kernelwright.verifier.judge`."""
    if server is not None:
        with open(os.devnull, "rb") as null_in, open(os.devnull, "wb") as null_out, \
                contextlib.suppress(SpawnRefused):
            return server.spawn("judge", [str(spec_path)], os.getcwd(), dict(os.environ),
                                (null_in.fileno(), null_out.fileno(), err.fileno()), new_session=True)
    return subprocess.Popen([sys.executable, "-m", "kernelwright.verifier.judge", str(spec_path)],
                            stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)


def _outside_pids(result: Path) -> list[int]:
    """A runner the fork server started for this judge (no descendant of it), from the judge's state."""
    pid = _read_state(result).get("runner_pid")
    return [pid] if isinstance(pid, int) and not isinstance(pid, bool) and pid > 1 else []


def _numbers(phases: object) -> dict[str, float]:
    """The phase seconds of a state file, keeping only name -> number entries (the file is untrusted)."""
    if not isinstance(phases, dict):
        return {}
    return {str(k): float(v) for k, v in phases.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def _worker_verdict(outcome: str, err: bytes, state: dict, returncode: int | None, timeout_s: float,
                    host_memory_gb: float) -> Verdict:
    """The verdict of a finished worker: its own, or what its end (time-out, memory, death) says."""
    phase, compile_s = _phase_and_compile_s(state)
    if outcome == "timeout":
        return Verdict.of("timeout", f"over {timeout_s:.0f} s during {phase}", compile_s=compile_s)
    if outcome == "host_memory":
        return Verdict.of("out_of_memory", f"host memory over {host_memory_gb:g} GiB during {phase}",
                          compile_s=compile_s)
    if "verdict" in state:
        try:
            return parse_report(state["verdict"])
        except MalformedReport as exc:
            return Verdict.of("malformed_report", str(exc)[:500])
    verdict = _death_verdict(returncode or 0, state)
    verdict.detail += f"; stderr: {err.decode(errors='replace')[-800:]}" if err else ""
    return verdict


def _read_state(path: Path) -> dict:
    """The worker's state file; anything unreadable or not a JSON object reads as no state."""
    try:
        state = jsontext.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def make_spec(cfg: VerifyConfig, lock: str | None = None, pch_lock: str | None = None) -> Spec:
    return Spec(problem=str(Path(cfg.problem).resolve()), candidate=str(Path(cfg.candidate).resolve()), result="",
                seeds=tuple(range(cfg.seeds)), timing=cfg.timing, compile_baseline=cfg.compile_baseline,
                memory_fraction=cfg.memory_fraction, build_cache=cfg.build_cache or _default_cache(),
                timing_budget_s=cfg.timing_budget_s, ref_timing_cache=cfg.ref_timing_cache,
                split_build=cfg.split_build, slim_header=cfg.slim_header, generic_bindings=cfg.generic_bindings,
                timing_lock=lock, pch_lock=pch_lock, blocking_gpu_wait=cfg.blocking_gpu_wait, gpu_gate=cfg.gpu_gate,
                profiler_warm_up=cfg.profiler_warm_up, min_custom_share=cfg.min_custom_share,
                timer_bound=cfg.timer_bound, gpu_ledger=host_gpu_ledger(), cpu_profile=_profile_folder(cfg),
                gpu_inputs=cfg.gpu_inputs, held_timed_outputs=cfg.held_timed_outputs,
                early_stop_clock=cfg.early_stop_clock,
                timing_seed=10_000 + secrets.randbelow(2**30),  # the candidate cannot know its timed inputs
                runner_user=list(dedicated_user(user)) if (user := runner_user()) is not None else None)


def _profile_folder(cfg: VerifyConfig) -> str | None:
    if not cfg.cpu_profile_dir:
        return None
    folder = Path(cfg.cpu_profile_dir).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder)


def verify_one(cfg: VerifyConfig) -> Verdict:
    source = read_inputs(Path(cfg.problem), Path(cfg.candidate))
    rejected = static_verdict(source)
    if rejected is not None:
        return rejected
    if cfg.static:
        return Verdict(status="correct", reason="static_ok", static_only=True, warnings=source_warnings(source),
                       detail="static checks passed; not run on a GPU (--static)")
    if (gated := nvrtc_gated(cfg)) is not None:
        return gated
    if not cuda_available():
        raise NoCudaDevice("no CUDA device on this machine: run with --static for the static checks alone")
    return run_worker(make_spec(cfg), cfg.timeout_s, cfg.host_memory_gb)


def nvrtc_gated(cfg: VerifyConfig) -> Verdict | None:
    """compile_error without a build, where NVRTC's rejection stands for nvcc's (`cfg.nvrtc_gate`)."""
    if not cfg.nvrtc_gate:
        return None
    verdict = nvrtc_verdict(source_text(Path(cfg.candidate)))
    if verdict is not None:
        verdict.judge_version = JUDGE_VERSION
        with_warnings(verdict, _candidate_warnings(cfg.candidate))
    return verdict


OnDone = Callable[[VerifyConfig, Verdict], None]


def run_workers(cfgs: Sequence[VerifyConfig], jobs: int, on_done: OnDone | None = None) -> list[Verdict]:
    """Worker runs of candidates that already passed `read_inputs` and the static checks (one whose
    device code NVRTC rejected gets `nvrtc_gated`'s verdict instead): builds and
    correctness overlap across `jobs` workers; timing is one at a time, across processes too
    (`host_timing_lock`). torch's precompiled header is
    built once, here, while the first workers start (pch.py), instead of by racing workers.
    `on_done(cfg, verdict)` is called as each one finishes (from a pool thread)."""
    if not cfgs:
        return []
    lock_path = host_timing_lock()
    with header_built_alongside(min(cfg.timeout_s for cfg in cfgs) / 2, enabled=cuda_available()) as pch_lock, \
            fork_server(len(cfgs) > 1 and all(cfg.forkserver for cfg in cfgs)) as server:

        def one(cfg: VerifyConfig) -> Verdict:
            try:
                verdict = nvrtc_gated(cfg)
                spec = make_spec(cfg, lock_path, pch_lock) if verdict is None else None
            except OSError as exc:  # its file went between the static checks and here: this one, not the batch
                verdict = Verdict.of("exception", f"could not read {exc.filename or cfg.candidate}: "
                                                  f"{exc.strerror or exc}", judge_version=JUDGE_VERSION)
            if verdict is None:
                assert spec is not None
                verdict = run_worker(spec, cfg.timeout_s, cfg.host_memory_gb, server)
            if on_done is not None:
                on_done(cfg, verdict)
            return verdict

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(one, cfgs))


def host_timing_lock() -> str:
    """The timing lock file that every verification on this host's GPU shares (the first visible one),
    whichever process runs it: two evaluations side by side on one GPU time their kernels one at a time,
    evaluations on other GPUs of the host beside them. Never removed (a process may hold it)."""
    return str(Path(tempfile.gettempdir()) / f"kw_timing_node_{os.getuid()}_gpu{visible_gpu()}.lock")


@contextlib.contextmanager
def fork_server(enabled: bool) -> Iterator[ForkServer | None]:
    """A fork server for the judges and runners of many candidates (None: off, or it did not start,
    and each starts its own Python)."""
    stack = contextlib.ExitStack()
    server = None
    if enabled:
        with contextlib.suppress(SpawnRefused):
            server = stack.enter_context(started_server(import_roots(), plain_env()))
    with stack:
        yield server


def _pre_check(cfg: VerifyConfig) -> Verdict | None:
    """A verdict reached without a worker (bad input, static rejection); None: run the worker."""
    try:
        source = read_inputs(Path(cfg.problem), Path(cfg.candidate))
    except UsageError as exc:
        return Verdict.of("exception", str(exc))
    return static_verdict(source)


def verify_many(cfgs: Sequence[VerifyConfig], jobs: int, on_done: OnDone | None = None) -> list[Verdict]:
    """Many candidates: the static checks, then `run_workers` for those that pass them."""
    pre = [_pre_check(cfg) for cfg in cfgs]
    for cfg, verdict in zip(cfgs, pre, strict=True):
        if verdict is not None and on_done is not None:
            on_done(cfg, verdict)
    ran = iter(run_workers([cfg for cfg, v in zip(cfgs, pre, strict=True) if v is None], jobs, on_done))
    return [v or next(ran) for v in pre]


def write_json(verdict: Verdict, dest: Path) -> None:
    atomic.write_json(dest, verdict.to_json())


def exit_code(verdict: Verdict) -> int:
    return 0 if verdict.correct else 1
