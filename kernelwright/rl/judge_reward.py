"""The reward function GRPO calls: completions written as candidates, judged, rewarded, logged.

`JudgeReward` is a TRL reward function (`prompts`, `completions` and the dataset's columns in, one
float per completion out). For each generation batch it

1. turns each completion into a candidate file: a whole problem's answer is the code of its first
   fenced block; an infill answer is spliced into its partial solution (infill_format.splice). A
   completion without code gets `no_candidate` and is not judged;
2. judges the batch at once (judging.py: the GPU judge, `verify_jobs` in parallel, or NVRTC), each
   distinct (problem, candidate) once: a policy sure of itself samples the same answer many times in a
   group, and the same text earns the same reward (`rl/judged_share`: distinct candidates judged over
   candidates with code). With `early` (early_judge.py), the candidates of rows that ended while the
   others still generated were sent to the judge then: their verdicts are taken from there
   (`rl/judged_early`: their share of the distinct candidates), and only the rest are judged here;
3. computes each reward part (reward.py) and checks that no rejected verdict got a positive reward
   (`rl/cheat_positive`, 0; anything else stops the run with CheatRewarded);
4. logs, per step: the mean of every reward part (`reward/<part>`), the count of every verdict reason
   (`reason/<reason>`), the cheat rate of the step and of the run so far (`rl/cheat_rate`,
   `rl/cheat_rate_run`), the reward's seconds and its share of the step's wall time (`rl/reward_s`,
   `rl/reward_share`); and every `samples_every` steps a table of prompts' ids, completions,
   verdicts and rewards (`samples/step_<n>.json`, mlflow.log_table).

A batch of the evaluation (`--eval-items`: set-aside prompts judged between steps) goes through the same
steps 1-3 and logs its means through TRL, which names them `eval_reward/total`, `eval_rl/correct_rate`,
...; the run's counts, timings and samples table are training's alone.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

import mlflow

from kernelwright.infill_format import completion_code, splice
from kernelwright.prompting import extract_code
from kernelwright.rl.curriculum import INFILL
from kernelwright.rl.judging import Judge, JudgeItem
from kernelwright.rl.reward import (
    CheatRewarded,
    RewardParts,
    RewardWeights,
    check_no_cheat_rewarded,
    is_cheat,
    is_rejected,
    reward_parts,
    was_built,
)
from kernelwright.verifier.verdict import REASON_STATUS, Verdict

log = logging.getLogger(__name__)
PARTS = tuple(f.name for f in fields(RewardParts))
SAMPLE_TEXT = 4000  # characters of a completion kept in the samples table
NO_CODE = "the completion holds no code"


@dataclass
class RunStats:
    """Counts over every batch this process rewarded."""

    completions: int = 0
    cheats: int = 0
    correct: int = 0
    reward_sum: float = 0.0
    reward_s: float = 0.0
    reasons: Counter[str] = field(default_factory=Counter)

    @property
    def cheat_rate(self) -> float:
        return self.cheats / self.completions if self.completions else 0.0


class StartedVerdicts(Protocol):
    """Verdicts begun before the reward was called (early_judge.EarlyJudge), by (reference, candidate source)."""

    def take(self, key: tuple[str, str]) -> Future[Verdict] | None: ...

    def reset(self) -> None: ...


def completion_text(completion: Any) -> str:
    """The text of a completion: a string, or the content of a conversational completion's last message."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content") or "")
    return str(completion)


def candidate_source(text: str, phase: str, partial: str) -> tuple[str | None, bool]:
    """(the candidate file, or None when the completion holds no code; whether the code was fenced)."""
    fenced = "```" in text
    if phase == INFILL:
        return (splice(partial, text), fenced) if completion_code(text) else (None, fenced)
    code = extract_code(text)
    return (code, fenced) if code.strip() else (None, fenced)


def judge_pairs(judge: Judge, scratch: Path, prefix: str, pairs: Sequence[tuple[str, str]]) -> list[Verdict]:
    """(reference, candidate source) pairs judged at once, each written as its folder's problem.py and
    candidate.py under a temporary folder of `scratch` (named `prefix`...), removed once judged."""
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch, prefix=prefix) as tmp:
        items = []
        for i, (reference, source) in enumerate(pairs):
            folder = Path(tmp) / str(i)
            folder.mkdir()
            (folder / "problem.py").write_text(reference, encoding="utf-8")
            (folder / "candidate.py").write_text(source, encoding="utf-8")
            items.append(JudgeItem(problem=folder / "problem.py", candidate=folder / "candidate.py"))
        verdicts = judge(items)
    if len(verdicts) != len(pairs):
        raise RuntimeError(f"the judge returned {len(verdicts)} verdicts for {len(pairs)} candidates")
    return verdicts


def batch_metrics(verdicts: Sequence[Verdict], parts: Sequence[RewardParts]) -> dict[str, float]:
    """Per-step means of the reward parts, the count of every verdict reason, and the rates."""
    n = max(len(verdicts), 1)
    out = {f"reward/{name}": sum(getattr(p, name) for p in parts) / n for name in PARTS}
    out["reward/total"] = sum(p.total for p in parts) / n
    counts = Counter(v.reason for v in verdicts)
    out |= {f"reason/{r}": float(counts.get(r, 0)) for r in sorted(set(REASON_STATUS) | set(counts))}
    out["rl/cheat_rate"] = sum(is_cheat(v) for v in verdicts) / n
    out["rl/rejected_rate"] = sum(is_rejected(v) for v in verdicts) / n
    out["rl/compile_rate"] = sum(was_built(v) for v in verdicts) / n
    out["rl/correct_rate"] = sum(v.correct and v.reason == "ok" for v in verdicts) / n
    return out


class JudgeReward:
    """The GRPO reward of a run (module docstring). `scratch`: where each batch's candidate files are written
    (a folder per batch, removed once judged)."""

    __name__ = "judge"

    def __init__(self, judge: Judge, weights: RewardWeights, scratch: Path, correctness_only: bool = False,
                 samples_every: int = 0, on_batch: Callable[[int, list[Verdict]], None] | None = None) -> None:
        self.judge, self.weights, self.scratch = judge, weights, scratch
        self.correctness_only, self.samples_every, self.on_batch = correctness_only, samples_every, on_batch
        self.stats = RunStats()
        self._last_end: float | None = None  # when the previous batch's reward ended
        self._calls = 0
        self.judged_share = 1.0  # of the last batch: distinct candidates judged / candidates with code
        self.early: StartedVerdicts | None = None  # verdicts started while the batch was generating (early_judge.py)
        self.judged_early = 0.0  # of the last batch: distinct candidates whose judging began before generation ended
        # Whether a batch is training's (the stage points this at the trainer's model): an evaluation's batch
        # (--eval-items) is judged and logged alike, through TRL, which names its metrics eval_*, but it leaves
        # the run's counts, the step's timing, the samples table and `on_batch` alone.
        self.is_training: Callable[[], bool] = lambda: True

    def __call__(self, prompts: list[Any], completions: list[Any], item_id: list[str], phase: list[str],
                 kind: list[str], reference: list[str], partial: list[str], trainer_state: Any = None,
                 log_metric: Callable[[str, float], None] | None = None, **_: Any) -> list[float]:
        started = time.perf_counter()
        self._calls += 1
        step = trainer_state.global_step + 1 if trainer_state is not None else self._calls
        texts = [completion_text(c) for c in completions]
        sources = [candidate_source(t, ph, part) for t, ph, part in zip(texts, phase, partial, strict=True)]
        verdicts = self._judge(step, [s for s, _ in sources], reference)
        parts = [reward_parts(v, self.weights, fenced=fenced, correctness_only=self.correctness_only)
                 for v, (_, fenced) in zip(verdicts, sources, strict=True)]
        totals = [p.total for p in parts]
        metrics = batch_metrics(verdicts, parts)
        try:
            metrics["rl/cheat_positive"] = float(check_no_cheat_rewarded(verdicts, totals))
        except CheatRewarded:
            if mlflow.active_run() is not None:
                mlflow.log_metric("rl/cheat_positive", float(sum(is_rejected(v) and t > 0
                                                                for v, t in zip(verdicts, totals, strict=True))),
                                  step=step)
            raise
        reward_s = time.perf_counter() - started
        metrics["rl/phase"] = sum(ph == INFILL for ph in phase) / max(len(phase), 1)  # 1: infill, 0: whole
        training = self.is_training()
        if training:
            self._count(verdicts, totals, reward_s)
            metrics["rl/cheat_rate_run"] = self.stats.cheat_rate
            metrics["rl/reward_s"] = reward_s
            metrics["rl/judged_share"] = self.judged_share
            metrics["rl/judged_early"] = self.judged_early
            if self._last_end is not None:  # one cycle: the last step's update, this batch's generation, its reward
                metrics["rl/reward_share"] = reward_s / max(time.perf_counter() - self._last_end, 1e-9)
            self._last_end = time.perf_counter()
        if log_metric is not None:
            for name, value in metrics.items():
                log_metric(name, value)
        if not training:
            self._last_end = None  # the next training batch's cycle would hold the evaluation
            return totals
        if self.samples_every and step % self.samples_every == 0 and mlflow.active_run() is not None:
            mlflow.log_table(samples_table(step, item_id, phase, kind, texts, verdicts, parts),
                             artifact_file=f"samples/step_{step:06d}.json")
        if self.on_batch is not None:
            self.on_batch(step, verdicts)
        return totals

    def _judge(self, step: int, sources: Sequence[str | None], references: Sequence[str]) -> list[Verdict]:
        """Every distinct candidate with code judged once, all at once, its verdict given to its copies;
        the others `no_candidate`."""
        verdicts: list[Verdict | None] = [None if s is not None else Verdict.of("no_candidate", NO_CODE)
                                          for s in sources]
        first: dict[tuple[str, str], int] = {}  # (problem, candidate) -> the first completion that wrote it
        copy_of = {i: first.setdefault((references[i], s), i) for i, s in enumerate(sources) if s is not None}
        todo = sorted(set(copy_of.values()))
        self.judged_share = len(todo) / len(copy_of) if copy_of else 1.0
        started = self._started_early(todo, sources, references)
        todo = [i for i in todo if i not in started]
        if todo:
            pairs = [(references[i], sources[i] or "") for i in todo]
            for i, verdict in zip(todo, judge_pairs(self.judge, self.scratch, f"step-{step}-", pairs), strict=True):
                verdicts[i] = verdict
        for i, future in started.items():
            verdicts[i] = future.result()
        for i, original in copy_of.items():
            verdicts[i] = verdicts[original]
        return [v for v in verdicts if v is not None]

    def _started_early(self, todo: Sequence[int], sources: Sequence[str | None],
                       references: Sequence[str]) -> dict[int, Future[Verdict]]:
        """The verdicts (futures) of `todo` that the early judge began while the batch was generating."""
        if self.early is None:
            self.judged_early = 0.0
            return {}
        started = {i: f for i in todo if (f := self.early.take((references[i], sources[i] or ""))) is not None}
        self.early.reset()
        self.judged_early = len(started) / len(todo) if todo else 0.0
        return started

    def _count(self, verdicts: Sequence[Verdict], totals: Sequence[float], reward_s: float) -> None:
        s = self.stats
        s.completions += len(verdicts)
        s.cheats += sum(is_cheat(v) for v in verdicts)
        s.correct += sum(v.correct and v.reason == "ok" for v in verdicts)
        s.reward_sum += sum(totals)
        s.reward_s += reward_s
        s.reasons.update(v.reason for v in verdicts)


def samples_table(step: int, item_id: Sequence[str], phase: Sequence[str], kind: Sequence[str], texts: Sequence[str],
                  verdicts: Sequence[Verdict], parts: Sequence[RewardParts]) -> dict[str, list[Any]]:
    """One row per completion of the batch: what was asked, what came back, what the judge and the reward said."""
    table: dict[str, list[Any]] = {
        "step": [step] * len(texts), "item_id": list(item_id), "phase": list(phase), "kind": list(kind),
        "completion": [t[:SAMPLE_TEXT] for t in texts], "reason": [v.reason for v in verdicts],
        "detail": [v.detail[:300] for v in verdicts], "speedup": [v.speedup for v in verdicts],
        "reward": [p.total for p in parts]}
    table |= {name: [getattr(p, name) for p in parts] for name in PARTS}
    return table
