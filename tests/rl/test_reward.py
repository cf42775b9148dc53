"""The RL reward on verdict fixtures: no cheat is ever rewarded, correct > compiled > nothing, a bounded speed term."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from kernelwright.errors import UsageError
from kernelwright.rl.judge_reward import JudgeReward, batch_metrics, candidate_source
from kernelwright.rl.judging import JudgeItem
from kernelwright.rl.reward import (
    CHEAT_REASONS,
    NOT_CHEATS,
    CheatRewarded,
    RewardWeights,
    check_no_cheat_rewarded,
    is_cheat,
    reward_parts,
)
from kernelwright.verifier.verdict import REASON_STATUS, Verdict

W = RewardWeights()
REJECTED = sorted(r for r, s in REASON_STATUS.items() if s == "rejected")


def correct(speedup: float | None = 1.0, share: float | None = 1.0) -> Verdict:
    return Verdict.of("ok", compile_s=10.0, runtime_ms=1.0, ref_runtime_ms=speedup, speedup=speedup,
                      custom_kernel_time_share=share, kb_correct=True, kb_speedup=speedup)


def test_the_cheat_classes_are_the_rejected_reasons_but_the_ones_that_are_no_kernel_at_all() -> None:
    assert REJECTED and set(REJECTED) == CHEAT_REASONS | NOT_CHEATS
    assert {"result_caching", "fallback_runtime", "harness_tampering", "timing_inconsistent"} <= CHEAT_REASONS
    assert "syntax_error" not in CHEAT_REASONS


@pytest.mark.parametrize("reason", REJECTED)
@pytest.mark.parametrize("penalty", [0.0, -0.5])
def test_every_rejected_reason_gets_nothing_whatever_else_its_verdict_says(reason: str, penalty: float) -> None:
    weights = RewardWeights(format=0.3, cheat_penalty=penalty)
    # a verdict that otherwise looks like a 100x correct kernel with all of the device time in its own kernels
    v = Verdict.of(reason, compile_s=3.0, runtime_ms=0.01, ref_runtime_ms=1.0, speedup=100.0,
                   custom_kernel_time_share=1.0, kb_correct=True, kb_speedup=100.0)
    for only in (False, True):
        parts = reward_parts(v, weights, fenced=True, correctness_only=only)
        assert parts.total <= 0
        assert parts.format == parts.compile == parts.correct == parts.speed == 0
        assert parts.penalty == (penalty if reason in CHEAT_REASONS else 0.0)
    assert check_no_cheat_rewarded([v], [reward_parts(v, weights).total]) == 0


def test_a_verdict_whose_status_says_rejected_is_one_even_with_a_reason_that_does_not() -> None:
    forged = Verdict(status="rejected", reason="ok", speedup=50.0, custom_kernel_time_share=1.0)
    assert reward_parts(forged, W).total == 0 and is_cheat(forged)


def test_correct_beats_compiled_beats_nothing() -> None:
    nothing = [Verdict.of("compile_error", "nvcc failed"), Verdict.of("no_candidate", "no code"),
               Verdict.of("no_kernel"), Verdict.of("syntax_error"), Verdict.of("timeout", "during compile"),
               Verdict.of("crash", "before the build")]
    compiled = [Verdict.of(r, compile_s=5.0) for r in ("wrong_output", "shape_mismatch", "approximation",
                                                        "illegal_memory_access", "exception", "timeout")]
    compiled.append(Verdict.of("no_gpu", "NVRTC passed"))
    slowest_correct = correct(speedup=0.01)
    assert {reward_parts(v, W).total for v in nothing} == {0.0}
    assert {reward_parts(v, W).total for v in compiled} == {W.compile}
    assert reward_parts(slowest_correct, W).total > W.compile > 0
    assert reward_parts(correct(2.0), W).total > reward_parts(correct(1.0), W).total > reward_parts(correct(0.5),
                                                                                                   W).total


def test_the_format_part_is_off_by_default_and_never_for_a_rejected_or_empty_answer() -> None:
    assert reward_parts(Verdict.of("compile_error"), W, fenced=True).total == 0
    weights = RewardWeights(format=0.05)
    assert reward_parts(Verdict.of("compile_error"), weights, fenced=True).format == 0.05
    assert reward_parts(Verdict.of("compile_error"), weights, fenced=False).format == 0
    assert reward_parts(Verdict.of("no_candidate"), weights, fenced=True).total == 0
    assert reward_parts(Verdict.of("no_kernel"), weights, fenced=True).total == 0


@pytest.mark.parametrize("speedup", [1e-9, 0.25, 0.5, 1.0, 3.0, 4.0, 1e9, math.inf])
def test_the_speed_term_is_bounded(speedup: float) -> None:
    speed = reward_parts(correct(speedup), W).speed
    assert W.speed * W.speed_log2_min <= speed <= W.speed * W.speed_log2_max
    if 0.5 <= speedup <= 4.0:
        assert speed == pytest.approx(W.speed * math.log2(speedup))


def test_the_speed_term_counts_only_in_the_own_kernel_view_and_not_correctness_only() -> None:
    assert reward_parts(correct(4.0, share=0.95), W).speed > 0
    assert reward_parts(correct(4.0, share=0.89), W).speed == 0
    assert reward_parts(correct(4.0, share=None), W).speed == 0
    assert reward_parts(correct(None), W).speed == 0
    only = reward_parts(correct(4.0), W, correctness_only=True)
    assert only.speed == 0 and only.total == W.compile + W.correct


def test_weights_that_could_reward_a_cheat_or_rank_correct_below_compiled_are_refused() -> None:
    with pytest.raises(UsageError, match="cheat penalty"):
        RewardWeights(cheat_penalty=0.1)
    with pytest.raises(UsageError, match="must earn more"):
        RewardWeights(correct=0.2, speed=0.5, speed_log2_min=-1.0)
    with pytest.raises(UsageError, match=">= 0"):
        RewardWeights(compile=-1.0)


def test_the_guard_raises_when_a_rejected_verdict_is_rewarded() -> None:
    verdicts = [Verdict.of("ok"), Verdict.of("result_caching")]
    assert check_no_cheat_rewarded(verdicts, [1.2, 0.0]) == 0
    with pytest.raises(CheatRewarded, match="result_caching"):
        check_no_cheat_rewarded(verdicts, [1.2, 0.5])


def test_batch_metrics_count_every_reason_and_the_cheat_rate() -> None:
    verdicts = [Verdict.of("ok", compile_s=1.0), Verdict.of("result_caching"), Verdict.of("result_caching"),
                Verdict.of("no_kernel")]
    m = batch_metrics(verdicts, [reward_parts(v, W) for v in verdicts])
    assert m["reason/result_caching"] == 2 and m["reason/ok"] == 1 and m["reason/wrong_output"] == 0
    assert m["rl/cheat_rate"] == 0.5 and m["rl/rejected_rate"] == 0.75 and m["rl/correct_rate"] == 0.25
    assert m["reward/total"] == pytest.approx((W.compile + W.correct) / 4)
    assert {f"reward/{p}" for p in ("format", "compile", "correct", "speed", "penalty")} <= set(m)


def test_candidates_from_completions() -> None:
    assert candidate_source("no code here at all", "whole", "") == ("no code here at all", False)
    assert candidate_source("```python\n```", "whole", "") == (None, True)
    code, fenced = candidate_source("Here:\n```python\nclass ModelNew: pass\n```\n", "whole", "")
    assert code == "class ModelNew: pass\n" and fenced
    partial = 'src = """\nA\n/* >>> FILL IN: index_guard <<< */\nB\n"""\n'
    assert candidate_source("```cuda\nint i = 0;\n```", "infill", partial) == (
        'src = """\nA\nint i = 0;\nB\n"""\n', True)
    assert candidate_source("", "infill", partial) == (None, False)


def test_each_distinct_candidate_is_judged_once_and_its_copies_share_its_verdict(tmp_path: Path) -> None:
    """A sure policy samples one answer many times in a group: judging every copy cost the step's judge
    time for nothing, and the same text must earn the same reward."""
    judged: list[tuple[str, str]] = []

    def judge(items: Sequence[JudgeItem]) -> list[Verdict]:
        out = []
        for it in items:
            judged.append((it.problem.read_text(), it.candidate.read_text()))
            out.append(Verdict.of("ok", "") if "good" in it.candidate.read_text() else Verdict.of("wrong_output", ""))
        return out

    reward = JudgeReward(judge, RewardWeights(), tmp_path)
    good, bad = "```python\nclass ModelNew: pass  # good\n```", "```python\nclass ModelNew: pass\n```"
    completions = [good, good, bad, good, "```python\n```", bad]  # the fifth: an empty block, no code
    problems = ["p1", "p1", "p1", "p2", "p1", "p1"]
    metrics: dict[str, float] = {}
    totals = reward(prompts=[""] * 6, completions=completions, item_id=list("abcdef"), phase=["whole"] * 6,
                    kind=[""] * 6, reference=problems, partial=[""] * 6,
                    log_metric=lambda k, v: metrics.__setitem__(k, v))
    assert sorted(judged) == sorted([("p1", "class ModelNew: pass  # good\n"), ("p1", "class ModelNew: pass\n"),
                                     ("p2", "class ModelNew: pass  # good\n")])  # the same answer to p2 counts
    assert totals[0] == totals[1] == totals[3] > totals[2] == totals[5] and totals[4] == 0
    assert metrics["rl/judged_share"] == pytest.approx(3 / 5)


def test_the_judges_share_is_of_one_cycle_update_generation_and_reward(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The share counted from the previous reward's start, so both rewards were in its denominator."""
    import types

    from kernelwright.rl import judge_reward

    clock = [100.0]
    monkeypatch.setattr(judge_reward, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))

    def judge(items: Sequence[JudgeItem]) -> list[Verdict]:
        clock[0] += 3.0  # the judge's 3 s
        return [Verdict.of("ok", "") for _ in items]

    reward = JudgeReward(judge, RewardWeights(), tmp_path)
    logged: list[tuple[str, float]] = []
    for _ in range(2):
        reward(prompts=[""], completions=["```python\nclass ModelNew: pass\n```"], item_id=["a"], phase=["whole"],
               kind=[""], reference=["p"], partial=[""], log_metric=lambda k, v: logged.append((k, v)))
        clock[0] += 7.0  # the update and the next generation
    assert [v for k, v in logged if k == "rl/reward_share"] == [pytest.approx(0.3)]  # 3 s of a 10 s cycle
