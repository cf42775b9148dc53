"""The runner: the only process that runs a candidate's code. It holds no verdict and no expected output.

    python -I -c "<path bootstrap>" SETTINGS.json      # started by kernelwright.verifier.judge

The judge starts it as an unprivileged user (when the judge is root) in a private scratch folder,
isolated from writable import paths (`python -I`; the package is imported from the judge's own
copy, which the runner cannot write); the runner confines itself with Landlock (sandbox.py) and a
seccomp filter (seccomp.py: no reaching into other processes, no inet sockets) and cuts its
network before it imports the candidate. Then it answers requests on the channel
(channel.py), one at a time:

| op | does | replies |
| --- | --- | --- |
| load | imports the problem and the candidate (the build; done before it is asked for) | compile_s, build |
| call | draws the inputs of (shape, seed, distribution), runs ModelNew `repeat` times (`skip_own`: decoy) | outputs |
| time | times ModelNew on fresh inputs from the judge's seed (timer.py), keeps the outputs | median_ms, kept |
| prepare_wall | the model the judge's clock times, and a buffer like its output | - |
| run_wall | calls the judge times on its own clock (or no-ops), each drawing its inputs, outputs held | checksums |
| save_wall | keeps the last batch's outputs (`keep`: the fastest so far), saves those the judge names | kept |
| share | the profiler's share of GPU time in own kernels and kernel ms per call, `passes` times | shares, kernel_ms |
| finish | the guard and the thread count, a last time | - |

A reply is the runner's word, checked by the judge; a rejection the runner finds in itself (a
launch error, a changed input, the harness tampered with) is a reply too. With `blocking_gpu_wait`
the runner sleeps while it waits for the GPU, and spins for the timed ops (`time`, `*_wall`: asked
under the timing lock only; gpu_wait.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelwright.verifier.build_failure import build_failure
from kernelwright.verifier.channel import RunnerEnd, save_output
from kernelwright.verifier.cpu_profile import RUNNER_FILE, started_profile, stop_and_dump
from kernelwright.verifier.gpu_wait import driver as gpu_wait_driver
from kernelwright.verifier.gpu_wait import set_wait
from kernelwright.verifier.guard import HarnessGuard
from kernelwright.verifier.inputs import clone, draw_check_inputs, draw_inputs, draw_on_gpu, poison
from kernelwright.verifier.isolation import (
    BUILD_PATHS,
    Rejected,
    classify_failure,
    import_file,
    no_network,
    own_launches_skipped,
    patch_load_inline,
    thread_count,
)
from kernelwright.verifier.profiling import profiled_kernels, profiler_started_alongside
from kernelwright.verifier.runner_uid import limit_tasks
from kernelwright.verifier.sandbox import confine, die_with_parent
from kernelwright.verifier.seccomp import deny_reaching_out
from kernelwright.verifier.seeding import seed_all
from kernelwright.verifier.timer import Timer
from kernelwright.verifier.timing import (
    OutputWriter,
    TimingSettings,
    checksum,
    draw_on_device,
    fresh_sets,
    median_ms,
)


class Runner:
    """The candidate's side of the protocol: one instance of ModelNew per (shape, init seed)."""

    def __init__(self, settings: dict[str, Any], scratch: Path, end: RunnerEnd) -> None:
        self.settings, self.scratch, self.end = settings, scratch, end
        self.outbox = scratch / "out"
        self.problem: Any = None  # the problem module, once loaded
        self.candidate: ModuleType | None = None
        self.timer: Timer | None = None
        self.guard: HarnessGuard | None = None
        self.models: dict[str, Any] = {}
        self.wall_model: Any = None
        self.wall_shape: dict[str, Any] = {}
        self.wall_like: Any = None  # the no-op candidate (OutputWriter) of a no-op batch
        self.wall_held: list[Any] = []  # the outputs of the last batch
        self.wall_kept: list[Any] = []  # the outputs of the batch the judge asked to keep
        self.timed_held: list[tuple[int, Any]] = []  # a `time` request's outputs, held for `save_timed`
        self.threads = 0
        self.count = 0
        self.preloaded: dict[str, Any] | None = None
        self.timing = TimingSettings(**settings["timing"])

    # ------------------------------------------------------------ ops

    def load(self, _req: dict[str, Any]) -> dict[str, Any]:
        """The reply to `load`: made once, right after `ready`, before the judge asks for it."""
        if self.preloaded is None:
            self.preloaded = self.answer("load", self._load)
        return self.preloaded

    def _load(self) -> dict[str, Any]:
        import torch

        self.problem = import_file(Path(self.settings["problem"]), "kw_problem")
        guard = HarnessGuard()
        guard.watch_module(self.problem, "problem")
        start = time.perf_counter()
        try:
            with profiler_started_alongside(bool(self.settings["profiler_warm_up"])):
                self.candidate = import_file(Path(self.settings["candidate"]), "kw_candidate")
        except Exception as exc:  # noqa: BLE001 - any import failure of the candidate is its compile error
            failure = build_failure(exc)  # the stage that failed and the compiler's first error
            raise Rejected("compile_error", failure.detail() if failure is not None else
                           f"{type(exc).__name__}: {str(exc)[-1500:]}") from None
        compile_s = time.perf_counter() - start
        guard.check()
        if not hasattr(self.candidate, "ModelNew"):
            raise Rejected("no_model_new", "the candidate defines no ModelNew")
        self.timer = Timer()
        guard.watch_instance(self.timer, "timer")
        guard.watch_instance(self.timer.rt, "timer.rt")
        self.guard = guard
        self._warm_up((getattr(self.problem, "SHAPES", None) or [{}])[0])
        torch.cuda.synchronize()
        self.threads = thread_count()
        return {"compile_s": compile_s, "build": ",".join(BUILD_PATHS)}

    def call(self, req: dict[str, Any]) -> dict[str, Any]:
        import torch

        model = self._model(req)
        inputs = draw_check_inputs(self.problem, req["shape"], int(req["seed"]), str(req["dist"]))
        like = torch.empty(req["like"]["shape"], dtype=getattr(torch, req["like"]["dtype"]), device="cuda")
        with own_launches_skipped() if req.get("skip_own") else contextlib.nullcontext(0) as skipped:
            outs = [self._run_checked(model, clone(inputs), like) for _ in range(int(req["repeat"]))]
        self.no_new_threads()  # before any timing: a thread's work would load the GPU while it is timed
        return {"outputs": [self._save(out) for out in outs], "skipped": skipped}

    def time(self, req: dict[str, Any]) -> dict[str, Any]:
        import torch

        model = self._model(req)
        sets = fresh_sets(self.problem, req["shape"], self.timing, int(req["seed"]))
        flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")
        keep = set(range(len(sets))) if req["keep_all"] else _random_indices(len(sets), int(req["keep_seed"]))
        assert self.timer is not None
        with torch.no_grad():
            timed = median_ms(model, sets, self.timer, self.timing, flush, keep.__contains__)
        del sets, flush
        reply: dict[str, Any] = {"median_ms": timed.median_ms, "trials": timed.trials, "sets": timed.sets}
        if req.get("hold"):  # every output held with its sum; the judge names the ones to save afterwards
            self.timed_held = timed.kept
            reply |= {"held": [i for i, _ in timed.kept], "sums": [checksum(out) for _, out in timed.kept]}
        else:
            reply["kept"] = [[i, self._save(out)] for i, out in timed.kept]
        del timed
        torch.cuda.empty_cache()  # the timed sets' memory goes back to the GPU for other candidates
        return reply

    def save_timed(self, req: dict[str, Any]) -> dict[str, Any]:
        """The held outputs of the last `time` request that the judge names, saved; the rest let go."""
        import torch

        names = {int(i) for i in req["indices"]}
        kept = [[i, self._save(out)] for i, out in self.timed_held if i in names]
        self.timed_held = []
        torch.cuda.empty_cache()
        return {"kept": kept}

    def prepare_wall(self, req: dict[str, Any]) -> dict[str, Any]:
        self.wall_model, self.wall_shape = self._model(req), req["shape"]
        self.wall_like = OutputWriter.of_form(req["like"])
        self.wall_held, self.wall_kept = [], []
        return {}

    def run_wall(self, req: dict[str, Any]) -> dict[str, Any]:
        """`count` calls, each on the draw of seed + i made just before it (no call sees a later call's
        inputs), each output summed on the host before the next call (a call ends when its output is
        written, whatever a synchronisation says) and held. A no-op batch draws, writes an output like
        the candidate's (OutputWriter) and sums alike."""
        import torch

        noop, seed, count = bool(req["noop"]), int(req["seed"]), int(req["count"])
        self.wall_held = []
        sums = []
        torch.cuda.synchronize()
        with torch.no_grad():
            for i in range(count):
                args = draw_on_device(self.problem, self.wall_shape, seed + i)
                out = (self.wall_like if noop else self.wall_model)(*args)
                sums.append(checksum(out))
                if not noop:
                    self.wall_held.append(out)
        return {"checksums": sums}

    def save_wall(self, req: dict[str, Any]) -> dict[str, Any]:
        """`keep`: the last batch's outputs replace those kept so far (else they are let go); then the
        kept outputs the judge names are saved."""
        import torch

        if req["keep"]:
            self.wall_kept = self.wall_held
        self.wall_held = []
        names = [int(i) for i in req["indices"]]
        kept = [[i, self._save(self.wall_kept[i])] for i in names if 0 <= i < len(self.wall_kept)]
        if req["release"]:
            self.wall_kept = []
            torch.cuda.empty_cache()  # the memory goes back to the GPU for other candidates
        return {"kept": kept}

    def share(self, req: dict[str, Any]) -> dict[str, Any]:
        model = self._model(req)
        inputs = draw_on_device(self.problem, req["shape"], int(req["seed"]))
        names = set(map(str, req["names"]))
        passes = [profiled_kernels(model, inputs, names) for _ in range(int(req["passes"]))]
        return {"shares": [s for s, _ in passes], "kernel_ms": [ms for _, ms in passes]}

    def finish(self, _req: dict[str, Any]) -> dict[str, Any]:
        assert self.guard is not None
        self.guard.check()
        self.no_new_threads()
        return {"build": ",".join(BUILD_PATHS)}

    def no_new_threads(self) -> None:
        """async_escape when the process has more threads than once the candidate was loaded and warm."""
        started = thread_count() - self.threads
        if started > 0:
            raise Rejected("async_escape", f"the candidate started {started} thread(s)")

    # ------------------------------------------------------------ parts

    def answer(self, op: str, run: Any) -> dict[str, Any]:
        """The fields of `op`'s reply: what `run()` returns, or the rejection it raised."""
        try:
            return dict(run())
        except Rejected as rej:
            return {"rejected": rej.reason, "detail": rej.detail}
        except Exception as exc:  # noqa: BLE001 - the candidate's failure is a reply, not the runner's end
            reason, detail = classify_failure(exc)
            return {"rejected": reason, "detail": detail}

    def _model(self, req: dict[str, Any]) -> Any:
        key = json.dumps([req["shape"], req["init_seed"]], sort_keys=True)
        if key not in self.models:
            assert self.problem is not None and self.candidate is not None
            seed_all(int(req["init_seed"]))  # as the judge seeds the reference (judge_checks.reference_models)
            self.models[key] = self.candidate.ModelNew(*self.problem.get_init_inputs()).cuda().eval()
        return self.models[key]

    def _run_checked(self, model: Any, inputs: list[Any], like: Any) -> Any:
        import torch

        assert self.timer is not None and self.guard is not None
        originals = clone(inputs)
        poison(like)
        with torch.no_grad():
            out = model(*inputs)
        torch.cuda.current_stream().synchronize()
        snapshot = out.clone() if type(out) is torch.Tensor else out
        torch.cuda.synchronize()
        err = self.timer.pending_error()
        if err:
            raise Rejected("launch_error", f"CUDA error {err} left pending by the candidate's launch")
        self.guard.check()
        for a, b in zip(inputs, originals, strict=True):
            if isinstance(a, torch.Tensor) and not torch.equal(a, b):
                raise Rejected("input_mutation", "the forward changed an input tensor in place")
        if type(out) is torch.Tensor and not torch.equal(snapshot.nan_to_num(), out.nan_to_num()):
            raise Rejected("async_escape", "the output changed after the current stream finished: work on a "
                                           "side stream")
        return out

    def _save(self, out: Any) -> dict[str, Any]:
        self.count += 1
        return save_output(out, self.outbox, f"{self.count}.bin")

    def _warm_up(self, shape: dict[str, Any]) -> None:
        """Start the thread pools torch itself uses (CPU input draws, CUDA) before counting threads:
        one draw, on the CPU and on the GPU."""
        import torch

        assert self.problem is not None
        draw_inputs(self.problem, shape, 0, "heavy_tailed")
        torch.cuda.synchronize()


def _random_indices(count: int, seed: int) -> set[int]:
    """A random quarter of the timed calls (at least one), drawn from the judge's seed."""
    import random

    rng = random.Random(seed)
    return set(rng.sample(range(count), max(1, count // 4)))


OPS = ("load", "call", "time", "save_timed", "prepare_wall", "run_wall", "save_wall", "share", "finish")
TIMED_OPS = frozenset({"time", "save_timed", "prepare_wall", "run_wall", "save_wall"})  # under the timing lock only


def serve(runner: Runner, before_finish: Callable[[], None] | None = None) -> None:
    """Answer the judge's requests until `finish` or the end of the channel; the candidate is loaded
    (built) first, while the judge sets itself up. `before_finish` runs before `finish` is answered."""
    runner.load({})
    blocking = bool(runner.settings.get("blocking_gpu_wait"))
    while (req := runner.end.next_request()) is not None:
        op = str(req.get("op"))
        if blocking:  # asleep while waiting for the GPU, spinning for the timed ops (gpu_wait.py)
            set_wait("spin" if op in TIMED_OPS else "block")
        if op not in OPS:
            runner.end.reply(op, rejected="exception", detail=f"unknown op {op!r}")
            continue
        answer = runner.answer(op, lambda o=op, r=req: getattr(runner, o)(r))
        if op == "finish" and before_finish is not None:
            before_finish()  # while the judge still waits: it ends the runner once answered
        runner.end.reply(op, **answer)
        if op == "finish":
            break


def main(argv: list[str]) -> None:
    settings = json.loads(Path(argv[0]).read_text())
    end = RunnerEnd()
    die_with_parent()  # SIGKILL when its parent (the judge, or the fork server) dies
    scratch = Path(settings["scratch"])
    os.chdir(scratch)
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.cuda.init()
    torch.cuda.set_per_process_memory_fraction(float(settings["memory_fraction"]))
    draw_on_gpu(bool(settings["gpu_inputs"]))  # as the judge draws (its spec says the same)
    if settings.get("blocking_gpu_wait"):
        gpu_wait_driver()  # loaded before confine() closes the file system
    isolation = f"{confine([scratch])}, {deny_reaching_out()}"
    if settings.get("tasks_max"):  # a uid of its own: the cap counts this runner's tasks only
        isolation += f", {limit_tasks(int(settings['tasks_max']))}"
    no_network()
    patch_load_inline(str(scratch / "builds"), bool(settings["split_build"]), settings.get("pch_lock"),
                      slim_host=bool(settings.get("slim_header", True)),
                      bare_host=bool(settings.get("generic_bindings", True)))
    prof = started_profile() if settings.get("cpu_profile") else None
    end.reply("ready", isolation=isolation)
    serve(Runner(settings, scratch, end),
          before_finish=None if prof is None else lambda: stop_and_dump(prof, scratch / RUNNER_FILE))
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: a candidate's atexit hooks cannot run after the last reply


if __name__ == "__main__":
    main(sys.argv[1:])
