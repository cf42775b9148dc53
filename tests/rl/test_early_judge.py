"""Completions judged as their rows end (rl/early_judge.py): which rows go, when, in what batches, and how the
reward takes their verdicts, on a fake judge and hand-made token rows."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelwright.rl.early_judge import EarlyJudge, judge_rows_as_they_end
from kernelwright.rl.judge_reward import JudgeReward
from kernelwright.rl.judging import JudgeItem
from kernelwright.rl.reward import RewardWeights
from kernelwright.verifier.verdict import Verdict

EOS, PAD = 9, 0
# token -> text: 1 and 2 are two answers with code, 3 an empty answer (no code)
TEXT = {1: "```python\nclass ModelNew: pass  # good\n```", 2: "```python\nclass ModelNew: pass\n```", 3: ""}


def decode(ids: list[int]) -> str:
    return "".join(TEXT.get(t, "") for t in ids if t not in (EOS, PAD))


class FakeJudge:
    """Records each call's (problem, candidate) pairs and the thread it ran on; `good` answers are ok."""

    def __init__(self) -> None:
        self.calls: list[list[tuple[str, str]]] = []
        self.threads: list[str] = []

    def __call__(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        pairs = [(it.problem.read_text(), it.candidate.read_text()) for it in items]
        self.calls.append(pairs)
        self.threads.append(threading.current_thread().name)
        return [Verdict.of("ok") if "good" in c else Verdict.of("wrong_output") for _, c in pairs]


def rows(*references: str) -> list[dict[str, Any]]:
    return [{"phase": "whole", "partial": "", "reference": r} for r in references]


def steps(early: EarlyJudge, width: int, tokens: list[list[int]]) -> None:
    """Run the processor over a generation whose rows are `tokens` (each row's new tokens, padded after its end),
    as generate would call it: once per step, with the tokens so far."""
    proc = early.processor(width, len(tokens))
    assert proc is not None
    prompt = torch.ones(len(tokens), width, dtype=torch.long)
    scores = torch.zeros(len(tokens), 12)
    for t in range(len(tokens[0]) + 1):
        ids = torch.cat([prompt, torch.tensor([row[:t] for row in tokens], dtype=torch.long)], dim=1)
        assert torch.equal(proc(ids, scores), scores)  # the scores are never changed


def test_rows_go_to_the_judge_as_they_end_in_batches(tmp_path: Path) -> None:
    judge = FakeJudge()
    early = EarlyJudge(judge, tmp_path, decode, [EOS], batch=2)
    early.expect(rows("p1", "p1", "p2", "p1", "p1"))
    steps(early, 3, [[1, EOS, PAD, PAD],   # ends at step 2
                     [2, 2, 2, 2],         # never ends: the reward judges it
                     [1, 1, EOS, PAD],     # ends at step 3: the batch of two goes
                     [3, EOS, PAD, PAD],   # no code: nothing to judge
                     [1, 1, 1, EOS]])      # the same answer to p1 as row 0: not judged twice
    early.close()
    assert judge.calls == [[("p1", "class ModelNew: pass  # good\n"), ("p2", "class ModelNew: pass  # good\n")]]
    assert judge.threads[0].startswith("kw-early-judge")
    got = early.take(("p2", "class ModelNew: pass  # good\n"))
    assert got is not None and got.result().reason == "ok"
    assert early.take(("p1", "class ModelNew: pass\n")) is None  # row 1 never ended
    early.reset()
    assert early.take(("p1", "class ModelNew: pass  # good\n")) is None


def test_a_generate_call_of_other_rows_than_expected_is_left_alone(tmp_path: Path) -> None:
    early = EarlyJudge(FakeJudge(), tmp_path, decode, [EOS], batch=1)
    assert early.processor(3, 2) is None  # nothing expected
    early.expect(rows("p1", "p1", "p1"))
    assert early.processor(3, 2) is None  # three rows expected, two came: the reward judges them all
    assert early.processor(3, 3) is None  # the expectation is used up by the call it was for
    assert EarlyJudge(FakeJudge(), tmp_path, decode, [], batch=1).processor(3, 0) is None  # no end token known


def test_the_reward_takes_what_was_judged_early_and_judges_only_the_rest(tmp_path: Path) -> None:
    early_judge, judge = FakeJudge(), FakeJudge()
    early = EarlyJudge(early_judge, tmp_path / "early", decode, [EOS], batch=1)
    early.expect(rows("p1", "p1"))
    steps(early, 2, [[1, EOS], [2, 2]])
    reward = JudgeReward(judge, RewardWeights(), tmp_path / "reward")
    reward.early = early
    metrics: dict[str, float] = {}
    totals = reward(prompts=["", ""], completions=[TEXT[1], TEXT[2]], item_id=["a", "b"], phase=["whole"] * 2,
                    kind=["", ""], reference=["p1", "p1"], partial=["", ""],
                    log_metric=lambda k, v: metrics.__setitem__(k, v))
    early.close()
    assert early_judge.calls == [[("p1", "class ModelNew: pass  # good\n")]]
    assert judge.calls == [[("p1", "class ModelNew: pass\n")]]  # only the row that ended last
    assert totals[0] > totals[1] and metrics["rl/judged_early"] == pytest.approx(0.5)


def test_an_early_batch_that_fails_fails_the_reward_as_the_judge_would(tmp_path: Path) -> None:
    def broken(items: Sequence[JudgeItem]) -> list[Verdict]:
        raise RuntimeError("the GPU is gone")

    early = EarlyJudge(broken, tmp_path, decode, [EOS], batch=1)
    early.expect(rows("p1"))
    steps(early, 2, [[1, EOS]])
    reward = JudgeReward(FakeJudge(), RewardWeights(), tmp_path / "reward")
    reward.early = early
    with pytest.raises(RuntimeError, match="the GPU is gone"):
        reward(prompts=[""], completions=[TEXT[1]], item_id=["a"], phase=["whole"], kind=[""], reference=["p1"],
               partial=[""])
    early.close()


def test_generate_reports_its_rows_only_where_they_were_expected(tmp_path: Path) -> None:
    seen: list[Any] = []

    class Model:
        def generate(self, *args: Any, **kwargs: Any) -> Any:
            seen.append(kwargs.get("logits_processor"))
            return "out"

    model = Model()
    early = EarlyJudge(FakeJudge(), tmp_path, decode, [EOS], batch=1)
    judge_rows_as_they_end(model, early)
    ids = torch.ones(2, 3, dtype=torch.long)
    assert model.generate(input_ids=ids) == "out" and seen[-1] is None
    early.expect(rows("p1", "p2"))
    model.generate(input_ids=ids, logits_processor=[])
    assert len(seen[-1]) == 1 and type(seen[-1][0]).__name__ == "RowsEnded"


def test_closing_waits_for_the_batch_being_judged_and_drops_those_not_begun(tmp_path: Path) -> None:
    started, release = threading.Event(), threading.Event()
    judge = FakeJudge()

    def slow(items: Sequence[JudgeItem]) -> list[Verdict]:
        started.set()
        release.wait(10)
        return judge(items)

    early = EarlyJudge(slow, tmp_path, decode, [EOS], batch=1)
    early.expect(rows("p1", "p2"))
    steps(early, 2, [[1, EOS], [1, EOS]])  # two batches of one: the first begins, the second waits
    assert started.wait(10)
    closing = threading.Thread(target=early.close)
    closing.start()
    release.set()
    closing.join(10)
    assert not closing.is_alive() and len(judge.calls) == 1


def test_a_closed_early_judge_starts_nothing_the_reward_would_wait_on(tmp_path: Path) -> None:
    """A generate call after close (the last evaluation once training ended) must not leave a started verdict
    that no thread will ever give: the reward judges those rows itself."""
    judge = FakeJudge()
    early = EarlyJudge(judge, tmp_path / "early", decode, [EOS], batch=1)
    early.close()
    early.expect(rows("p1"))
    steps(early, 2, [[1, EOS]])
    assert early.take(("p1", "class ModelNew: pass  # good\n")) is None and judge.calls == []
    reward = JudgeReward(judge, RewardWeights(), tmp_path / "reward")
    reward.early = early
    totals = reward(prompts=[""], completions=[TEXT[1]], item_id=["a"], phase=["whole"], kind=[""],
                    reference=["p1"], partial=[""])
    assert judge.calls == [[("p1", "class ModelNew: pass  # good\n")]] and totals[0] > 0
