"""The judge: one candidate, one problem; the verdict, reached outside the candidate's reach.

    python -m kernelwright.verifier.judge SPEC.json      # started by kernelwright.verifier.verify

The judge starts a runner (runner.py: the only process that runs the candidate's code, confined
by sandbox.py) and keeps to itself what decides the verdict: the seeds (each sent with the call
that uses it), the reference and its float64 twin, every expected output, the comparisons, the
reference's timing and its cache, its own clock over the runner's timed batches, and the verdict
file. Everything the runner says is data to check; a runner that dies, hangs, or answers with
garbage gets a verdict (crash, exit_called, timeout, malformed_report), never an exception here.
Protocol: docs/verification.md; reason codes: kernelwright.verifier.verdict.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from types import ModuleType

from kernelwright.verifier.admission import Ledger, estimate_bytes, read_peak, reference_peak, write_peak
from kernelwright.verifier.channel import ChannelBroken, RunnerGone
from kernelwright.verifier.cpu_profile import profiled
from kernelwright.verifier.gpu_wait import start_blocking
from kernelwright.verifier.inputs import draw_on_gpu
from kernelwright.verifier.isolation import Rejected, classify_failure, import_file
from kernelwright.verifier.judge_checks import Checked, check_not_decoy, check_shape, outcome_of_death
from kernelwright.verifier.judge_process import RUNNER_REASONS, started_runner
from kernelwright.verifier.judge_timing import time_shape
from kernelwright.verifier.kb_view import settle, strict_or_kb, views_of
from kernelwright.verifier.link import Link, RunnerRejected
from kernelwright.verifier.profiling import candidate_kernel_names
from kernelwright.verifier.spec import Progress, Spec
from kernelwright.verifier.summary import roofline, summarise
from kernelwright.verifier.timing import read_ref_cache, ref_cache_path
from kernelwright.verifier.verdict import ShapeResult, Verdict


def verify(spec: Spec, progress: Progress, link: Link, problem: ModuleType) -> Verdict:
    """Correctness on every shape, then timing, then a recheck on fresh inputs."""
    import torch

    shapes = getattr(problem, "SHAPES", None) or [{}]
    dtype = str(getattr(problem, "DTYPE", "float32"))
    refs = [read_ref_cache(ref_cache_path(problem, s, spec)) for s in shapes]
    progress.write(phase="compile")
    loaded = link.ask("load")
    compile_s = float(loaded.get("compile_s", 0.0)) if isinstance(loaded.get("compile_s"), int | float) else 0.0
    progress.write(phase="correctness", compile_s=compile_s, build=str(loaded.get("build", ""))[:80])
    if spec.blocking_gpu_wait:  # asleep while waiting for the GPU, spinning under the timing lock (gpu_wait.py)
        start_blocking()
    ledger = _ledger(spec)
    if ledger is not None and read_peak(spec.build_cache, spec.problem) is None:
        _measure_peak(spec, problem, shapes, ledger)
    with torch.no_grad():
        checked = [check_shape(problem, s, spec, link, spec.seeds) for s in shapes]
        if spec.decoy_check:
            check_not_decoy(problem, shapes[0], spec, link, checked[0])
    views = strict_or_kb(checked)  # the strict and KernelBench views' findings, the recheck's joining them
    off_the_gpu(checked)
    results = [ShapeResult(shape=s, correct=True, max_abs_err=c.worst, tolerance_rule=c.rules)
               for s, c in zip(shapes, checked, strict=True)]
    contention: list[str] = []
    if spec.timing:
        names = sorted(candidate_kernel_names(Path(spec.candidate)))
        results = []
        for s, c, cache in zip(shapes, checked, refs, strict=True):
            before = ledger.others(spec.ledger_token) if ledger is not None else 0
            c.ref_model.cuda()
            results.append(time_shape(problem, s, spec, link, c, cache, progress, names))
            c.ref_model.cpu()
            crowd = max(before, ledger.others(spec.ledger_token) if ledger is not None else 0)
            if crowd:
                beside = ("their GPU steps waited: the GPU gate" if spec.gpu_gate else
                          "their correctness runs share it; their timing does not")
                contention.append(f"shape {json.dumps(s)}: timed and profiled while {crowd} other candidate(s) "
                                  f"held the GPU ({beside})")
        for r, c in zip(results, checked, strict=True):
            r.max_abs_err, r.tolerance_rule = c.worst, c.rules
            r.roofline_share = roofline(problem, r.shape, dtype, r.runtime_ms or 0.0, spec)
        low = [r for r in results if (r.custom_kernel_time_share or 0.0) < spec.min_custom_share]
        if low:
            spread = low[0].custom_kernel_time_share_spread
            raise Rejected("fallback_runtime", f"only {low[0].custom_kernel_time_share:.0%} of GPU time in the "
                                               f"candidate's kernels on shape {low[0].shape}" +
                           (f" (median of passes spread over {spread:.3f})" if spread is not None else ""))
        progress.write(phase="recheck")
        with torch.no_grad():
            for s, c in zip(shapes, checked, strict=True):  # class 6: fresh inputs after timing
                views.append(views_of(check_shape(problem, s, spec, link, (spec.timing_seed % 1000 + 97,), c.fan_in)))
    finished = link.ask("finish")
    if isinstance(finished.get("build"), str) and finished["build"]:
        progress.write(build=finished["build"][:80])  # a lazily built extension is built by now
    verdict = summarise(results, compile_s)
    verdict.contention = contention
    return settle(verdict, views)


def _ledger(spec: Spec) -> Ledger | None:
    return Ledger(Path(spec.gpu_ledger)) if spec.gpu_ledger else None


def _measure_peak(spec: Spec, problem: ModuleType, shapes: list[dict], ledger: Ledger) -> None:
    """The reference's peak, measured once per problem and cached; this candidate's hold corrected."""
    peak = reference_peak(problem, shapes, spec.seeds[0])
    write_peak(spec.build_cache, spec.problem, peak)
    if spec.ledger_token:
        ledger.update(spec.ledger_token, estimate_bytes(peak))


def off_the_gpu(checked: list[Checked]) -> None:
    """After the correctness draws: the float64 twins let go (only the decoy check used them) and the
    reference models moved to the host (each comes back for its shape's timing); the memory
    returned to the GPU for other candidates."""
    import torch

    for c in checked:
        c.twin = None
        c.ref_model.cpu()
    torch.cuda.empty_cache()


def judged(spec: Spec, progress: Progress) -> Verdict:
    """The verdict, whatever the runner does. The runner starts first: its start-up (Python, torch,
    CUDA, the build) overlaps the judge's own."""
    progress.write(phase="start_runner")
    with started_runner(spec) as runner:
        progress.runner_cpu = runner.cpu_s
        if runner.outside_pid is not None:
            progress.write(runner_pid=runner.outside_pid)  # its memory counts with the judge's (verify.watch)
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        draw_on_gpu(spec.gpu_inputs)  # as the runner draws (its settings say the same)
        problem = import_file(Path(spec.problem), "kw_problem")
        try:
            runner.ready()
            verdict = verify(spec, progress, runner.link, problem)
        except RunnerRejected as rej:
            verdict = (Verdict.of(rej.reason, rej.detail) if rej.reason in RUNNER_REASONS else
                       Verdict.of("malformed_report", f"the runner reported reason {rej.reason!r}"))
        except Rejected as rej:
            verdict = Verdict.of(rej.reason, rej.detail)
        except ChannelBroken as exc:
            verdict = Verdict.of("malformed_report", f"the runner's reply: {exc}"[:500])
        except RunnerGone as gone:
            phase = str(progress.state.get("phase", ""))
            verdict = outcome_of_death(gone, phase, runner.exit_code(), runner.stderr_tail())
        verdict.isolation = runner.isolation or None
        progress.write(phase="finish")  # the last phase's runner CPU, read while the runner is there
        verdict.cpu_s = {"judge": time.process_time(), "runner": runner.cpu_s()}
    return verdict


def main(argv: list[str]) -> int:
    spec = Spec(**json.loads(Path(argv[0]).read_text()))
    progress = Progress(Path(spec.result))
    try:
        with profiled(spec.cpu_profile, f"judge-{os.getpid()}.prof"):
            verdict = judged(spec, progress)
    except Rejected as rej:
        verdict = Verdict.of(rej.reason, rej.detail)
    except Exception as exc:  # noqa: BLE001 - the reference or a loaded output failed: a verdict all the same
        reason, detail = classify_failure(exc)
        verdict = Verdict.of(reason, detail)
    if verdict.compile_s is None and isinstance(progress.state.get("compile_s"), float):
        verdict.compile_s = progress.state["compile_s"]
    verdict.build = str(progress.state.get("build") or "") or None
    progress.write(phase="done")
    verdict.phase_s = dict(progress.state["phase_s"])
    verdict.judge_phase_cpu_s = dict(progress.state["judge_phase_cpu_s"])
    verdict.runner_phase_cpu_s = dict(progress.state["runner_phase_cpu_s"])
    progress.write(verdict=verdict.to_json())
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    os._exit(code)
