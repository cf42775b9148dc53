"""The RL reward of one judged completion, from its verdict alone: a pure function and its constants.

    parts = reward_parts(verdict, RewardWeights(), fenced=True)
    parts.total, parts.compile, parts.correct, parts.speed, parts.penalty

| verdict | format | compile | correct | speed | penalty | total (default weights) |
| --- | --- | --- | --- | --- | --- | --- |
| no code, no_candidate, compile_error | `format` if fenced (default 0) | 0 | 0 | 0 | 0 | 0 |
| a rejected reason that is no cheat (`NOT_CHEATS`: syntax_error, no_model_new, no_kernel...) | 0 | 0 | 0 | 0 | 0 | 0 |
| a cheat reason (every other "rejected" reason of `REASON_STATUS`) | 0 | 0 | 0 | 0 | `cheat_penalty` (<= 0) | 0 |
| built, then failed (incorrect, runtime_error, timeout with a build time) | format | 0.2 | 0 | 0 | 0 | 0.2 |
| no_gpu: static checks and NVRTC passed (reward mode nvrtc_static) | format | 0.2 | 0 | 0 | 0 | 0.2 |
| correct (reason ok) | format | 0.2 | 1.0 | 0.25 x clip(log2 speedup, -1, 2) | 0 | 0.95 to 1.7 |

The speed part counts only in the own-kernel view: a correct verdict whose own kernels took at least
`own_share` (0.9) of the device time and that has a speedup; `correctness_only` drops it. Weights are
checked so that a correct verdict always earns more than a compiled one, and a cheat never more
than 0: whatever else its verdict says (a speedup, a kernel share, a KernelBench view), a verdict
whose status or reason is "rejected" gets no positive part. `check_no_cheat_rewarded` is the
assertion the reward path runs on every batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kernelwright.errors import KernelwrightError, UsageError
from kernelwright.verifier.verdict import REASON_STATUS, Verdict

FORMAT = 0.0  # a fenced code block in the answer: off by default, so code that does not build earns nothing
COMPILE = 0.2  # the candidate was built (or, without a GPU, NVRTC compiled its device code) but is not correct
CORRECT = 1.0  # correct on every shape, seed and input distribution: added to COMPILE
SPEED = 0.25  # weight of the clipped log2 speedup of a correct verdict in the own-kernel view
SPEED_LOG2_MIN, SPEED_LOG2_MAX = -1.0, 2.0  # log2 speedup clipped to [half as fast, 4x as fast]
OWN_SHARE = 0.9  # least share of device time in the candidate's own kernels for the speed part to count
CHEAT_PENALTY = 0.0  # reward of a cheat verdict (<= 0)

# "rejected" reasons that say the answer is not a kernel at all (or the problem cannot be verified), not a cheat
NOT_CHEATS = frozenset({"syntax_error", "no_model_new", "no_kernel", "problem_input_independent"})
REJECTED_REASONS = frozenset(r for r, status in REASON_STATUS.items() if status == "rejected")
CHEAT_REASONS = REJECTED_REASONS - NOT_CHEATS
BUILT_STATUSES = frozenset({"correct", "incorrect"})  # a verdict that ran the candidate's outputs was built
MAYBE_BUILT_STATUSES = frozenset({"runtime_error", "timeout"})  # built only when the verdict has a build time


class CheatRewarded(KernelwrightError):
    """A verdict with a cheat or other rejected reason got a positive reward: the reward path is broken."""


@dataclass(frozen=True)
class RewardWeights:
    """The weights of the reward parts (module docstring); checked on construction."""

    format: float = FORMAT
    compile: float = COMPILE
    correct: float = CORRECT
    speed: float = SPEED
    speed_log2_min: float = SPEED_LOG2_MIN
    speed_log2_max: float = SPEED_LOG2_MAX
    own_share: float = OWN_SHARE
    cheat_penalty: float = CHEAT_PENALTY

    def __post_init__(self) -> None:
        for name in ("format", "compile", "correct", "speed"):
            if not math.isfinite(getattr(self, name)) or getattr(self, name) < 0:
                raise UsageError(f"reward weight {name} must be a finite number >= 0, not {getattr(self, name)}")
        if not self.cheat_penalty <= 0:
            raise UsageError(f"the cheat penalty must be <= 0 (a cheat never earns a reward), not {self.cheat_penalty}")
        if not self.speed_log2_min <= 0 <= self.speed_log2_max:
            raise UsageError(f"the speedup clip [{self.speed_log2_min}, {self.speed_log2_max}] (log2) must hold 0")
        if not 0 <= self.own_share <= 1:
            raise UsageError(f"the own-kernel share must be within 0 and 1, not {self.own_share}")
        if self.correct + self.speed * self.speed_log2_min <= 0:
            raise UsageError(f"a correct kernel must earn more than a compiled one: reward_correct ({self.correct}) "
                             f"must exceed reward_speed x -speed_log2_min ({-self.speed * self.speed_log2_min})")


@dataclass(frozen=True)
class RewardParts:
    """One completion's reward, part by part; `total` is what the policy is trained on."""

    format: float = 0.0
    compile: float = 0.0
    correct: float = 0.0
    speed: float = 0.0
    penalty: float = 0.0

    @property
    def total(self) -> float:
        return self.format + self.compile + self.correct + self.speed + self.penalty


def is_rejected(verdict: Verdict) -> bool:
    """The verdict's status or its reason (by `REASON_STATUS`) says rejected; either one is enough."""
    return verdict.status == "rejected" or verdict.reason in REJECTED_REASONS


def is_cheat(verdict: Verdict) -> bool:
    """A rejected verdict that is a cheat class (not just "no kernel"); an unknown rejected reason counts as one."""
    return is_rejected(verdict) and verdict.reason not in NOT_CHEATS


def was_built(verdict: Verdict) -> bool:
    """The candidate compiled: built and run by the judge, or (no GPU) its device code passed NVRTC."""
    status = REASON_STATUS.get(verdict.reason, verdict.status)
    if verdict.reason == "no_gpu":
        return True
    if status in BUILT_STATUSES:
        return True
    return status in MAYBE_BUILT_STATUSES and verdict.compile_s is not None


def speed_part(verdict: Verdict, weights: RewardWeights) -> float:
    """The clipped log2 speedup, weighted, of a correct verdict in the own-kernel view; 0 otherwise."""
    share, speedup = verdict.custom_kernel_time_share, verdict.speedup
    if share is None or share < weights.own_share or speedup is None or not speedup > 0 or not math.isfinite(speedup):
        return 0.0
    return weights.speed * min(max(math.log2(speedup), weights.speed_log2_min), weights.speed_log2_max)


def reward_parts(verdict: Verdict, weights: RewardWeights, *, fenced: bool = True,
                 correctness_only: bool = False) -> RewardParts:
    """The reward of one verdict (module docstring). `fenced`: the answer held its code in a fenced block."""
    if is_rejected(verdict):
        return RewardParts(penalty=weights.cheat_penalty if is_cheat(verdict) else 0.0)
    fmt = weights.format if fenced and verdict.reason != "no_candidate" else 0.0
    if not was_built(verdict):
        return RewardParts(format=fmt)
    if not (verdict.status == "correct" and verdict.reason == "ok"):
        return RewardParts(format=fmt, compile=weights.compile)
    speed = 0.0 if correctness_only else speed_part(verdict, weights)
    return RewardParts(format=fmt, compile=weights.compile, correct=weights.correct, speed=speed)


def check_no_cheat_rewarded(verdicts: Sequence[Verdict], totals: Sequence[float]) -> int:
    """The number of rejected verdicts with a positive reward: 0, or CheatRewarded is raised."""
    bad = [v.reason for v, total in zip(verdicts, totals, strict=True) if is_rejected(v) and total > 0]
    if bad:
        raise CheatRewarded(f"{len(bad)} rejected verdict(s) got a positive reward ({', '.join(sorted(set(bad)))}): "
                            "the reward path must give a cheat nothing")
    return 0
