"""The judge's share of an RL step in the run's curves: the reward's seconds over TRL's step time."""

from __future__ import annotations

import pytest

from kernelwright.rl.curves import RLCurves


def test_the_judges_share_is_the_rewards_seconds_over_the_steps() -> None:
    curves = RLCurves("r", series={"rl/reward_s": {1: 231.5, 2: 101.3}, "step_time": {1: 244.8, 2: 167.6},
                                   "rl/reward_share": {2: 0.25}, "reward/total": {1: 1.0, 2: 0.5}})
    assert curves.judge_share() == {1: pytest.approx(231.5 / 244.8), 2: pytest.approx(101.3 / 167.6)}
    assert curves.summary()["judge_share_of_step_mean"] == pytest.approx((231.5 / 244.8 + 101.3 / 167.6) / 2)


def test_without_step_times_the_logged_share_is_used() -> None:
    curves = RLCurves("r", series={"rl/reward_share": {2: 0.4, 3: 0.6}, "reward/total": {1: 1.0, 2: 0.5, 3: 0.2}})
    assert curves.judge_share() == {2: 0.4, 3: 0.6}
    assert curves.summary()["judge_share_of_step_mean"] == pytest.approx(0.5)


def test_the_share_judged_while_generating_is_summed_up_where_logged() -> None:
    curves = RLCurves("r", series={"rl/judged_early": {1: 0.5, 2: 0.75}, "reward/total": {1: 1.0, 2: 0.5}})
    assert curves.summary()["judged_early_mean"] == pytest.approx(0.625)
    assert RLCurves("r", series={"reward/total": {1: 1.0}}).summary()["judged_early_mean"] is None  # older runs
