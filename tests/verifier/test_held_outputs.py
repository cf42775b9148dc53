"""The trials' outputs held by the runner with their sums, and the few the judge chooses read back
(verifier/held_outputs.py), on a fake link; the whole protocol on a GPU."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from kernelwright.verifier import held_outputs
from kernelwright.verifier.channel import ChannelBroken
from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.isolation import Rejected
from kernelwright.verifier.judge_timing import time_candidate
from kernelwright.verifier.timing import WARM_UP_CALLS, checksum
from kernelwright.verifier.verify import verify_many
from tests.verifier.test_judge_clock import FakeClock, FakeRunner, _target, clock, honest  # noqa: F401 - clock: a fixture
from tests.verifier.test_judge_clock import _link as clock_link

FIXTURES = Path(__file__).parent.parent / "fixtures" / "verify"


class HeldRunner:
    """A runner that held `trials` outputs (output j is full of j) and saves those asked for;
    `changed`: those outputs differ from what it summed; `send`: the indices it answers with instead."""

    def __init__(self, trials: int, changed: set[int] | None = None, send: list[int] | None = None) -> None:
        self.outs = {WARM_UP_CALLS + j: torch.full((4,), float(j)) for j in range(trials)}
        self.changed, self.send = changed or set(), send
        self.asked: list[list[int]] = []

    def reply(self) -> dict[str, Any]:
        return {"median_ms": 0.1, "trials": len(self.outs), "sets": WARM_UP_CALLS + len(self.outs),
                "held": list(self.outs), "sums": [checksum(o) for o in self.outs.values()]}

    def ask(self, op: str, **f: Any) -> dict[str, Any]:
        assert op == "save_timed"
        self.asked.append(f["indices"])
        names = self.send if self.send is not None else f["indices"]
        return {"kept": [[i, {"tensor": self.outs[i] + (1.0 if i in self.changed else 0.0)}] for i in names]}


@pytest.fixture(autouse=True)
def _headers_hold_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(held_outputs, "load_output", lambda header, outbox, device="cuda": header["tensor"])


def _link(runner: HeldRunner) -> Any:
    return SimpleNamespace(ask=runner.ask, outbox=Path("."))


def test_the_judge_reads_back_the_last_trial_and_seven_more_chosen_after_the_trials() -> None:
    runner = HeldRunner(100)
    kept = held_outputs.held_kept(_link(runner), runner.reply(), 16, random.Random(3))
    (asked,) = runner.asked
    assert len(asked) == 8 and asked[-1] == WARM_UP_CALLS + 99 and asked == sorted(set(asked))
    assert all(WARM_UP_CALLS <= i < WARM_UP_CALLS + 100 for i in asked)
    assert [i for i, _ in kept] == asked and all(torch.equal(out, runner.outs[i]) for i, out in kept)
    other = HeldRunner(100)
    held_outputs.held_kept(_link(other), other.reply(), 16, random.Random(4))
    assert other.asked != runner.asked  # which trials are read back is the judge's draw


def test_large_outputs_read_back_fewer_and_one_trial_reads_back_itself() -> None:
    runner = HeldRunner(50)
    held_outputs.held_kept(_link(runner), runner.reply(), 200 << 20, random.Random(1))
    assert len(runner.asked[0]) == 2  # 512 MiB at most, of 200 MiB outputs
    single = HeldRunner(1)
    assert [i for i, _ in held_outputs.held_kept(_link(single), single.reply(), 16)] == [WARM_UP_CALLS]


def test_an_output_changed_after_its_sum_is_timing_inconsistent() -> None:
    runner = HeldRunner(10, changed={WARM_UP_CALLS + 9})  # the last trial is always read back
    with pytest.raises(Rejected) as err:
        held_outputs.held_kept(_link(runner), runner.reply(), 16, random.Random(0))
    assert err.value.reason == "timing_inconsistent" and "timed call 10" in err.value.detail


@pytest.mark.parametrize("broken", ["fewer_held", "fewer_sums", "other_indices", "warm_up_held", "no_trials"])
def test_a_reply_that_does_not_hold_every_trial_or_answers_other_outputs_breaks_the_channel(broken: str) -> None:
    runner = HeldRunner(10, send=[WARM_UP_CALLS, WARM_UP_CALLS + 1] if broken == "other_indices" else None)
    reply = runner.reply()
    if broken == "fewer_held":
        reply["held"] = reply["held"][:-1]
    elif broken == "fewer_sums":
        reply["sums"] = reply["sums"][:-1]
    elif broken == "warm_up_held":
        reply["held"] = [0, *reply["held"][1:]]
    elif broken == "no_trials":
        reply |= {"trials": 0, "held": [], "sums": []}
    with pytest.raises(ChannelBroken):
        held_outputs.held_kept(_link(runner), reply, 16, random.Random(0))


@pytest.mark.gpu
def test_held_outputs_give_the_fixtures_their_verdicts_on_gpu(tmp_path: Path) -> None:
    """The honest candidates correct and the lazy and result-caching ones rejected as without it."""
    expected = json.loads((FIXTURES / "expected.json").read_text())
    names = ["honest_affine.py", "honest_matmul_large.py", "lazy_when_timed.py", "result_cache.py"]
    cfgs = [VerifyConfig(problem=str(FIXTURES / "problems" / expected[n]["problem"]),
                         candidate=str(FIXTURES / "candidates" / n), compile_baseline=False,
                         held_timed_outputs=True, build_cache=str(tmp_path / "builds")) for n in names]
    got = {n: v.reason for n, v in zip(names, verify_many(cfgs, jobs=4), strict=True)}
    assert got == {n: expected[n]["reason"] for n in names}


class HeldFakeRunner(FakeRunner):
    """test_judge_clock's runner on the fake clock, holding its one timed output with its sum when asked."""

    def ask(self, op: str, **f: Any) -> dict[str, Any]:
        if op == "time" and f["hold"]:
            self.asked.append(op)
            self.timed = honest(f["seed"] + WARM_UP_CALLS)
            return {"median_ms": self.timer_ms.pop(0), "trials": 1, "sets": WARM_UP_CALLS + 1,
                    "held": [WARM_UP_CALLS], "sums": [checksum(self.timed)]}
        if op == "save_timed":
            self.asked.append(op)
            return {"kept": [[i, {"tensor": self.timed}] for i in f["indices"]]}
        return super().ask(op, **f)


def test_the_timing_asks_for_held_outputs_only_where_every_one_fits(clock: FakeClock) -> None:  # noqa: F811
    held = HeldFakeRunner(clock, call_ms=0.3, timer_ms=[0.31])
    got = time_candidate(clock_link(held), {}, 7000, True, _target(), held=True)
    assert held.asked[:2] == ["time", "save_timed"] and got.kept[0][0] == WARM_UP_CALLS
    assert torch.equal(got.kept[0][1], honest(7000 + WARM_UP_CALLS))
    quarter = HeldFakeRunner(clock, call_ms=0.3, timer_ms=[0.31])  # not all fit: written as before
    time_candidate(clock_link(quarter), {}, 7000, False, _target(), held=True)
    assert "save_timed" not in quarter.asked
