"""The judge's correctness draws: the runner runs the candidate, the judge holds the truth.

- `check_shape`: every distribution x seed of one shape. For each draw the judge computes the
  reference's output and its float64 twin's (tolerance.py; on the first draw also the output's
  fan-in, fan_in.py), sends the runner the draw's seed with the output's shape (so it can poison
  the memory the output will land in), and compares the outputs the runner sends back, which are
  only data: a missing file, a wrong size or dtype is a verdict about the candidate. Each output
  is judged by the strict rule and by KernelBench's (kb_view.py); a strict failure KernelBench's
  rule accepts is held (`Deferred`) while the draws go on. The expected outputs never leave the
  judge.
- `outcome_of_death`: the verdict of a runner that closed the channel or stopped answering.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from types import ModuleType
from typing import Any

from kernelwright.verifier.channel import ChannelBroken, Described, RunnerGone, field, load_output
from kernelwright.verifier.fan_in import cached_fan_in, estimate_fan_in
from kernelwright.verifier.gpu_gate import gpu_step
from kernelwright.verifier.inputs import DISTRIBUTIONS, clone, compare, draw_check_inputs
from kernelwright.verifier.isolation import Rejected
from kernelwright.verifier.kb_view import DEFERRABLE, Deferred, kb_close
from kernelwright.verifier.link import Link, RunnerRejected
from kernelwright.verifier.seeding import seed_all
from kernelwright.verifier.spec import Spec
from kernelwright.verifier.tolerance import TimedBound, fp64_output, fp64_twin
from kernelwright.verifier.verdict import Verdict


@dataclass
class Checked:
    """One shape's correctness: the worst max abs error, the rule(s) that judged, the reference
    model (kept for the timed outputs' check) and the request fields naming the candidate's model."""

    worst: float
    rules: str
    ref_model: Any
    call: dict[str, Any]
    timed_bound: TimedBound
    twin: Any = None  # the reference's float64 twin (None where the problem cannot run in float64)
    fan_in: int | None = None  # input elements per output element (fan_in.py; None: not measured)
    kb_ok: bool = True  # KernelBench's tolerance held on every draw
    deferred: Deferred = dataclass_field(default_factory=Deferred)  # a strict failure KernelBench's rule accepted


def reference_models(problem: ModuleType, shape: dict[str, Any], seed: int) -> tuple[Any, Any | None]:
    """The reference (weights from `seed`, as the runner builds ModelNew) and its float64 twin."""
    init = problem.get_init_inputs()
    warm = draw_check_inputs(problem, shape, seed, DISTRIBUTIONS[0])
    seed_all(seed)
    ref = problem.Model(*init).cuda().eval()
    ref(*clone(warm))
    return ref, fp64_twin(problem, init, ref, seed, warm, "cuda")


def check_shape(problem: ModuleType, shape: dict[str, Any], spec: Spec, link: Link,
                seeds: tuple[int, ...], fan_in: int | None = None) -> Checked:
    """Distribution-major: a failure right after a passing draw of the same distribution that
    repeats the previous output is result caching (class 6); an output that does not depend on the
    input (the previous distribution's output again, a constant, or an input passed through) is
    class 3; another failure is the reason of its comparison, naming the distributions it was
    right and wrong on. `fan_in`: measured before (None: on the first draw with a float64 twin)."""
    import torch

    with gpu_step(spec.timing_lock, spec.gpu_gate):
        ref_model, twin = reference_models(problem, shape, spec.seeds[0])
    call = {"shape": shape, "init_seed": spec.seeds[0]}
    worst, rules, refs, bound = 0.0, set[str](), [], TimedBound()
    previous: tuple[str, Any] | None = None
    passed: list[str] = []  # the distributions every draw of which passed
    deferred, kb_ok = Deferred(), True
    for dist in DISTRIBUTIONS:
        dist_ok = True
        for seed in seeds:
            with gpu_step(spec.timing_lock, spec.gpu_gate):  # the draw's GPU work: both models' calls, the comparison
                inputs = draw_check_inputs(problem, shape, seed, dist)
                expected = ref_model(*clone(inputs))
                expected64 = fp64_output(twin, inputs)
                if fan_in is None and expected64 is not None:
                    fan_in = _fan_in(spec, shape, twin, inputs, expected64, seed)
                like = expected if type(expected) is torch.Tensor else torch.empty(0, device="cuda")
                reply = link.ask("call", **call, seed=seed, dist=dist, repeat=2,
                                 like={"shape": list(like.shape), "dtype": str(like.dtype).removeprefix("torch.")})
                outs = [load_output(h, link.outbox) for h in field(reply, "outputs", list)]
                if len(outs) != 2:
                    raise ChannelBroken(f"{len(outs)} outputs for 2 calls")
                for out in outs:
                    reason, detail, err = _compared(out, expected, expected64, rules, fan_in)
                    close = kb_close(out, expected)
                    if reason is not None:
                        reason, detail = classified(reason, detail, out, inputs, expected, dist, previous, passed)
                        if not (close and reason in DEFERRABLE):
                            raise Rejected(reason, detail)
                        deferred.hold(reason, detail)
                        dist_ok = False
                    elif err == err:
                        worst = max(worst, err)
                    kb_ok = kb_ok and close
                    bound = bound.widened(out, expected)
            refs.append(expected)
            previous = (dist, outs[-1])
        if dist_ok:
            passed.append(dist)
    _check_problem_depends_on_input(refs)
    if deferred and not kb_ok:
        raise Rejected(deferred.reason, deferred.detail)
    return Checked(worst, ",".join(sorted(rules)), ref_model, call, bound, twin, fan_in, kb_ok, deferred)


def _fan_in(spec: Spec, shape: dict[str, Any], twin: Any, inputs: list[Any], expected64: Any, seed: int) -> int | None:
    """The output's fan-in (fan_in.py), measured on this draw with the float64 twin or read from the cache."""
    def measure() -> int | None:
        return estimate_fan_in(lambda xs: fp64_output(twin, xs), inputs, expected64, seed)

    return cached_fan_in(spec.build_cache, spec.problem, shape, spec.seeds[0], measure)


DECOY_SEED_OFFSET = 7919  # the decoy check's draw: a seed no correctness draw used


def check_not_decoy(problem: ModuleType, shape: dict[str, Any], spec: Spec, link: Link, checked: Checked) -> None:
    """fallback_decoy: the candidate's output is still right with its own kernel launches skipped
    (the split build's launchers return at once), so its kernels do not make the output. Only where
    every build was split (the runner reports how many extensions it switched off; 0: no check).
    Against candidates that do not fight it: the runner is the candidate's process."""
    import torch

    seed = spec.seeds[0] + DECOY_SEED_OFFSET
    dist = DISTRIBUTIONS[0]
    with gpu_step(spec.timing_lock, spec.gpu_gate):
        inputs = draw_check_inputs(problem, shape, seed, dist)
        expected = checked.ref_model(*clone(inputs))
        like = expected if type(expected) is torch.Tensor else torch.empty(0, device="cuda")
        try:
            reply = link.ask("call", **checked.call, seed=seed, dist=dist, repeat=1, skip_own=True,
                             like={"shape": list(like.shape), "dtype": str(like.dtype).removeprefix("torch.")})
        except RunnerRejected:  # it fails without its kernels: they matter
            return
        skipped = field(reply, "skipped", int)
        outs = [load_output(h, link.outbox) for h in field(reply, "outputs", list)]
        if skipped <= 0 or len(outs) != 1:
            return
        reason, _detail, _err = _compared(outs[0], expected, fp64_output(checked.twin, inputs), set(), checked.fan_in)
    if reason is None:
        raise Rejected("fallback_decoy", f"the output is still right with the candidate's own kernel launches "
                                         f"skipped ({skipped} extension(s)): its kernels do not make the output")


def _compared(out: Any, expected: Any, expected64: Any, rules: set[str],
              fan_in: int | None = None) -> tuple[str | None, str, float]:
    if isinstance(out, Described):
        detail = "output has no CUDA storage" if out.no_storage or out.device != "cuda" else f"output is {out.kind}"
        return "non_tensor_output", detail, float("nan")
    return compare(out, expected, expected64, rules, fan_in)


def classified(reason: str, detail: str, out: Any, inputs: list[Any], expected: Any, dist: str,
               previous: tuple[str, Any] | None, passed: list[str]) -> tuple[str, str]:
    """(reason, detail) of a failed output. A tolerance failure (DEFERRABLE) that repeats the
    previous draw's output is result caching within a distribution, and an output that does not
    depend on the input across them; so is a constant output where the reference's is not, and one
    of the draw's inputs passed through unchanged (class 3). Any other keeps its reason, naming the
    distributions it was wrong and right on."""
    import torch

    if reason not in DEFERRABLE or type(out) is not torch.Tensor:
        return reason, detail
    if previous is not None and _same(out, previous[1]):
        if previous[0] == dist:
            return "result_caching", f"a new {dist} input returned the previous input's output"
        return "input_independent", (f"the same output for {previous[0]} and {dist} inputs: it does not depend "
                                     f"on its input ({detail})")
    if _constant(out) and not (type(expected) is torch.Tensor and _constant(expected)):
        return "input_independent", f"a constant output on {dist} inputs: it does not depend on its input ({detail})"
    if any(_same(out, x) for x in inputs):
        return "input_independent", f"the output is its input on {dist} inputs: it computes nothing from it ({detail})"
    right = f" (right on {', '.join(passed)})" if passed else ""
    return reason, f"wrong on {dist} inputs{right}: {detail}"


def _same(a: Any, b: Any) -> bool:
    import torch

    return (type(a) is torch.Tensor and type(b) is torch.Tensor and a.shape == b.shape and a.dtype == b.dtype
            and a.device == b.device and torch.equal(a.nan_to_num(), b.nan_to_num()))


def _constant(x: Any) -> bool:
    flat = x.nan_to_num().flatten()
    return flat.numel() > 1 and bool((flat == flat[0]).all())


def _check_problem_depends_on_input(refs: list[Any]) -> None:
    import torch

    if len(refs) > 1 and all(type(r) is torch.Tensor and torch.equal(refs[0], r) for r in refs[1:]):
        raise Rejected("problem_input_independent", "the reference output is the same for every input")


def outcome_of_death(gone: RunnerGone, phase: str, returncode: int | None, stderr: str) -> Verdict:
    """A runner that stopped answering: over its time (timeout), killed by a signal (crash), or
    exited without the protocol's last reply (exit_called)."""
    tail = f"; stderr: {stderr[-600:]}" if stderr.strip() else ""
    if gone.timed_out:
        return Verdict.of("timeout", f"the runner did not answer during {phase}: {gone}")
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return Verdict.of("crash", f"runner killed by {name} during {phase}{tail}")
    code = "still running" if returncode is None else f"exit status {returncode}"
    return Verdict.of("exit_called", f"the runner closed the channel during {phase} ({code}){tail}")
