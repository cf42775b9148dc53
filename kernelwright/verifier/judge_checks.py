"""The judge's correctness draws: the runner runs the candidate, the judge holds the truth.

- `check_shape`: every distribution x seed of one shape. For each draw the judge computes the
  reference's output and its float64 twin's (tolerance.py), sends the runner the draw's seed with
  the output's shape (so it can poison the memory the output will land in), and compares the
  outputs the runner sends back, which are only data: a missing file, a wrong size or dtype is a
  verdict about the candidate. The expected outputs never leave the judge.
- `outcome_of_death`: the verdict of a runner that closed the channel or stopped answering.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kernelwright.verifier.channel import ChannelBroken, Described, RunnerGone, field, load_output
from kernelwright.verifier.inputs import DISTRIBUTIONS, clone, compare, draw_check_inputs
from kernelwright.verifier.isolation import Rejected
from kernelwright.verifier.judge_timing import Link, RunnerRejected
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


def reference_models(problem: ModuleType, shape: dict[str, Any], seed: int) -> tuple[Any, Any | None]:
    """The reference (weights from `seed`, as the runner builds ModelNew) and its float64 twin."""
    import torch

    init = problem.get_init_inputs()
    warm = draw_check_inputs(problem, shape, seed, DISTRIBUTIONS[0])
    torch.manual_seed(seed)
    ref = problem.Model(*init).cuda().eval()
    ref(*clone(warm))
    return ref, fp64_twin(problem, init, ref, seed, warm, "cuda")


def check_shape(problem: ModuleType, shape: dict[str, Any], spec: Spec, link: Link,
                seeds: tuple[int, ...]) -> Checked:
    """Distribution-major: a failure right after a passing draw of the same distribution that
    repeats the previous output is result caching (class 6); a failure on the first draw of a new
    distribution after the default one passed is an input-distribution cheat (class 3)."""
    import torch

    ref_model, twin = reference_models(problem, shape, spec.seeds[0])
    call = {"shape": shape, "init_seed": spec.seeds[0]}
    worst, rules, refs, bound = 0.0, set[str](), [], TimedBound()
    previous: tuple[str, Any] | None = None
    for dist in DISTRIBUTIONS:
        for seed in seeds:
            inputs = draw_check_inputs(problem, shape, seed, dist)
            expected = ref_model(*clone(inputs))
            expected64 = fp64_output(twin, inputs)
            like = expected if type(expected) is torch.Tensor else torch.empty(0, device="cuda")
            reply = link.ask("call", **call, seed=seed, dist=dist, repeat=2,
                             like={"shape": list(like.shape), "dtype": str(like.dtype).removeprefix("torch.")})
            outs = [load_output(h, link.outbox) for h in field(reply, "outputs", list)]
            if len(outs) != 2:
                raise ChannelBroken(f"{len(outs)} outputs for 2 calls")
            for out in outs:
                reason, detail, err = _compared(out, expected, expected64, rules)
                if reason is not None:
                    _raise_classified(reason, detail, out, dist, previous)
                worst = max(worst, err) if err == err else worst
                bound = bound.widened(out, expected)
            refs.append(expected)
            previous = (dist, outs[-1])
    _check_problem_depends_on_input(refs)
    return Checked(worst, ",".join(sorted(rules)), ref_model, call, bound, twin)


DECOY_SEED_OFFSET = 7919  # the decoy check's draw: a seed no correctness draw used


def check_not_decoy(problem: ModuleType, shape: dict[str, Any], spec: Spec, link: Link, checked: Checked) -> None:
    """fallback_decoy: the candidate's output is still right with its own kernel launches skipped
    (the split build's launchers return at once), so its kernels do not make the output. Only where
    every build was split (the runner reports how many extensions it switched off; 0: no check).
    Against candidates that do not fight it: the runner is the candidate's process."""
    import torch

    seed = spec.seeds[0] + DECOY_SEED_OFFSET
    dist = DISTRIBUTIONS[0]
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
    reason, _detail, _err = _compared(outs[0], expected, fp64_output(checked.twin, inputs), set())
    if reason is None:
        raise Rejected("fallback_decoy", f"the output is still right with the candidate's own kernel launches "
                                         f"skipped ({skipped} extension(s)): its kernels do not make the output")


def _compared(out: Any, expected: Any, expected64: Any, rules: set[str]) -> tuple[str | None, str, float]:
    if isinstance(out, Described):
        detail = "output has no CUDA storage" if out.no_storage or out.device != "cuda" else f"output is {out.kind}"
        return "non_tensor_output", detail, float("nan")
    return compare(out, expected, expected64, rules)


def _raise_classified(reason: str, detail: str, out: Any, dist: str, previous: tuple[str, Any] | None) -> None:
    import torch

    if reason == "wrong_output" and previous is not None:
        prev_dist, prev_out = previous
        same = type(out) is torch.Tensor and type(prev_out) is torch.Tensor and out.shape == prev_out.shape and \
            torch.equal(out.nan_to_num(), prev_out.nan_to_num())
        if same and prev_dist == dist:
            raise Rejected("result_caching", f"a new {dist} input returned the previous input's output")
        if prev_dist != dist:
            raise Rejected("input_independent", f"correct on {prev_dist} inputs, wrong on {dist} inputs ({detail})")
    raise Rejected(reason, detail)


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
