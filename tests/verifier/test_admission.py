"""GPU memory admission on the CPU: the queue (a fake GPU's memory, fake estimates), the retry alone
of an out-of-memory among other candidates, and the reference's cached peak."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from kernelwright.verifier import admission, verify
from kernelwright.verifier.admission import Hold, Ledger, admits, capacity, estimate_bytes
from kernelwright.verifier.spec import Spec
from kernelwright.verifier.verdict import Verdict

GIB = 1 << 30
GPU = (40 * GIB, 38 * GIB)  # total, free: a capacity of 0.9 x 40 GiB less the timing's reserve


def test_a_candidate_is_admitted_when_its_estimate_fits_beside_the_others() -> None:
    room = capacity(GPU[0])
    assert room == int(0.9 * 40 * GIB) - admission.TIMING_RESERVE_BYTES
    held = [Hold("a", 1, 20 * GIB)]
    assert admits([], Hold("b", 1, 100 * GIB), GPU)  # nobody else: admitted, whatever it needs
    assert admits(held, Hold("b", 1, room - 20 * GIB), GPU)
    assert not admits(held, Hold("b", 1, room - 20 * GIB + 1), GPU)
    assert not admits(held, Hold("b", 1, 2 * GIB), (40 * GIB, 1 * GIB))  # the GPU's free memory is short
    assert admits(held, Hold("b", 1, 200 * GIB), None)  # no figures of the GPU: only `alone` holds back
    assert not admits(held, Hold("b", 1, 1, alone=True), GPU)  # alone: an empty GPU
    assert not admits([Hold("a", 1, 1, alone=True)], Hold("b", 1, 1), GPU)


def _ledger(tmp_path: Path, memory: tuple[int, int] | None = GPU, **kw: Any) -> Ledger:
    return Ledger(tmp_path / "ledger.json", memory=lambda: memory, poll_s=0.005, **kw)


class Clock:
    """The ledger's time, moved by the test alone: a patience runs out when the test says so,
    however slowly a loaded machine runs the waiting threads."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Holder:
    """A thread that waits for admission, holds until told to go, and records when it was admitted."""

    def __init__(self, ledger: Ledger, estimate: int, order: list[str], name: str, alone: bool = False) -> None:
        self.admitted, self.go = threading.Event(), threading.Event()
        self.hold: Hold | None = None
        self.ledger, self.estimate, self.order, self.name, self.alone = ledger, estimate, order, name, alone
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with self.ledger.admitted(self.estimate, self.alone) as hold:
            self.hold = hold
            self.order.append(self.name)
            self.admitted.set()
            self.go.wait(30)

    def release(self) -> None:
        self.go.set()
        self.thread.join(30)


def _waiting(ledger: Ledger, n: int) -> None:
    """Until `n` candidates wait in line."""
    deadline = time.monotonic() + 30
    while not ledger.path.exists() or len(json.loads(ledger.path.read_text())["queue"]) < n:
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_the_rest_wait_in_line_until_their_estimate_fits(tmp_path: Path) -> None:
    """Past the patience of the one ahead (here none at all), first come, first admitted."""
    ledger, order = _ledger(tmp_path, patience_s=0.0), list[str]()
    big = Holder(ledger, 20 * GIB, order, "big")
    assert big.admitted.wait(30)
    second = Holder(ledger, 15 * GIB, order, "second")  # 20 + 15 GiB: over the 30 GiB capacity
    _waiting(ledger, 1)
    small = Holder(ledger, 1 * GIB, order, "small")  # would fit, but waits its turn behind `second`
    _waiting(ledger, 2)
    assert not second.admitted.is_set() and not small.admitted.is_set()
    big.release()
    assert second.admitted.wait(30) and small.admitted.wait(30)
    assert order == ["big", "second", "small"]
    small.release()
    second.release()
    assert big.hold is not None and big.hold.others == 0  # nobody held memory beside it
    assert second.hold is not None and second.hold.others == 1
    assert json.loads(ledger.path.read_text()) == {"holders": [], "queue": []}


def _one_holding_one_alone_waiting(ledger: Ledger, order: list[str]) -> tuple[Holder, Holder]:
    """`first` holding 1 GiB, and a retry alone waiting in line for the GPU to empty."""
    first = Holder(ledger, 1 * GIB, order, "first")
    assert first.admitted.wait(30)
    lone = Holder(ledger, 1 * GIB, order, "alone", alone=True)
    _waiting(ledger, 1)
    return first, lone


def test_a_candidate_run_alone_waits_for_an_empty_gpu_and_keeps_others_out(tmp_path: Path) -> None:
    ledger, order = _ledger(tmp_path, patience_s=0.0), list[str]()
    first, lone = _one_holding_one_alone_waiting(ledger, order)
    later = Holder(ledger, 1 * GIB, order, "later")
    _waiting(ledger, 2)
    first.release()
    assert lone.admitted.wait(30)
    time.sleep(0.05)
    assert not later.admitted.is_set()
    lone.release()
    assert later.admitted.wait(30)
    later.release()
    assert order == ["first", "alone", "later"] and lone.hold is not None and lone.hold.others == 0


def test_a_candidate_that_fits_passes_one_that_does_not_within_its_patience(tmp_path: Path) -> None:
    """A big estimate waiting for memory does not keep a small one off the GPU, until it has waited
    its patience: then the small ones wait behind it again and it is served as the holders leave."""
    clock = Clock()
    ledger, order = _ledger(tmp_path, patience_s=1.5, clock=clock), list[str]()
    big = Holder(ledger, 20 * GIB, order, "big")
    assert big.admitted.wait(30)
    second = Holder(ledger, 15 * GIB, order, "second")  # over the capacity beside `big`: waits
    _waiting(ledger, 1)
    small = Holder(ledger, 1 * GIB, order, "small")  # fits: passes `second`, which has waited < 1.5 s
    assert small.admitted.wait(30) and not second.admitted.is_set()
    clock.now += 1.6  # `second` has now waited its patience
    late = Holder(ledger, 1 * GIB, order, "late")
    _waiting(ledger, 2)
    time.sleep(0.1)
    assert not late.admitted.is_set()  # it would fit, but `second` is served first now
    big.release()
    assert second.admitted.wait(30) and late.admitted.wait(30)
    assert order == ["big", "small", "second", "late"]
    for holder in (small, second, late):
        holder.release()
    assert json.loads(ledger.path.read_text()) == {"holders": [], "queue": []}


def test_an_alone_waiter_lets_others_pass_until_its_patience_ends(tmp_path: Path) -> None:
    """A retry alone waits for an empty GPU; meanwhile others still start, for its patience."""
    clock = Clock()
    ledger, order = _ledger(tmp_path, patience_s=1.5, clock=clock), list[str]()
    first, lone = _one_holding_one_alone_waiting(ledger, order)
    early = Holder(ledger, 1 * GIB, order, "early")
    assert early.admitted.wait(30) and not lone.admitted.is_set()
    clock.now += 1.6  # `alone` has now waited its patience
    late = Holder(ledger, 1 * GIB, order, "late")
    _waiting(ledger, 2)
    first.release()
    time.sleep(0.1)
    assert not lone.admitted.is_set() and not late.admitted.is_set()  # `early` still holds memory
    early.release()
    assert lone.admitted.wait(30)
    time.sleep(0.05)
    assert not late.admitted.is_set()  # the alone one keeps the GPU to itself while it runs
    lone.release()
    assert late.admitted.wait(30)
    late.release()
    assert order == ["first", "early", "alone", "late"]


def test_a_waiter_from_an_older_ledger_is_served_first(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    ledger.path.write_text(json.dumps({"holders": [{"token": "h", "pid": 1, "bytes": 30 * GIB}],
                                       "queue": [{"token": "w", "pid": 1, "bytes": 30 * GIB}]}))
    assert not ledger._try(Hold("new", 1, 1 * GIB))  # the old waiter (no queued_at) is not passed


def test_holders_and_waiters_of_dead_processes_are_dropped(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path, alive=lambda pid: pid != 4_000_000)
    ledger.path.write_text(json.dumps({"holders": [{"token": "gone", "pid": 4_000_000, "bytes": 30 * GIB}],
                                       "queue": [{"token": "gone2", "pid": 4_000_000, "bytes": 1}]}))
    with ledger.admitted(25 * GIB) as hold:  # the dead holder's 30 GiB no longer count
        assert hold.others == 0 and ledger.others(hold.token) == 0
        ledger.update(hold.token, 3 * GIB)
        assert json.loads(ledger.path.read_text())["holders"][0]["bytes"] == 3 * GIB


def test_an_estimate_is_the_references_peak_times_the_factor_plus_two_contexts(tmp_path: Path) -> None:
    problem = tmp_path / "p.py"
    problem.write_text("x = 1\n")
    cache = str(tmp_path / "builds")
    assert admission.read_peak(cache, str(problem)) is None
    contexts = 2 * admission.CONTEXT_BYTES
    assert estimate_bytes(None) == int(admission.PEAK_FACTOR * admission.UNKNOWN_PEAK_BYTES) + contexts
    admission.write_peak(cache, str(problem), 3 * GIB)
    assert admission.read_peak(cache, str(problem)) == 3 * GIB
    assert estimate_bytes(3 * GIB) == int(admission.PEAK_FACTOR * 3 * GIB) + contexts
    problem.write_text("x = 2\n")  # another problem text: not measured yet
    assert admission.read_peak(cache, str(problem)) is None
    assert admission.read_peak(None, str(problem)) is None


@pytest.fixture()
def judged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """verify.run_worker with the judge stood in for: `outcomes` are the verdicts (reason, watch
    outcome) of its runs in order; each run records how many others held the GPU then."""
    record: dict[str, Any] = {"outcomes": [], "others": [], "ledger": _ledger(tmp_path), "before_first": None}

    def judge_once(spec: Spec, timeout_s: float, host_memory_gb: float, server: Any) -> tuple[Verdict, str]:
        record["others"].append(record["ledger"].others(spec.ledger_token))
        if record["before_first"] is not None and len(record["others"]) == 1:
            record["before_first"]()
        reason, outcome = record["outcomes"].pop(0)
        return Verdict.of(reason, "GPU 0: 306 MiB free" if reason == "out_of_memory" else ""), outcome

    monkeypatch.setattr(verify, "_judge_once", judge_once)
    monkeypatch.setattr(verify, "Ledger", lambda path, memory=None: record["ledger"])
    yield record


def _spec(tmp_path: Path) -> Spec:
    return Spec(problem=str(tmp_path / "p.py"), candidate="c.py", result="", gpu_ledger=str(tmp_path / "ledger.json"))


def test_out_of_memory_beside_others_is_verified_again_alone(judged: dict[str, Any], tmp_path: Path) -> None:
    order: list[str] = []
    neighbour = Holder(judged["ledger"], 1 * GIB, order, "neighbour")
    assert neighbour.admitted.wait(30)
    judged["outcomes"] = [("out_of_memory", "exit"), ("ok", "exit")]
    judged["before_first"] = neighbour.release  # it leaves while the first run fails; the retry waits for that
    verdict = verify.run_worker(_spec(tmp_path), 10.0)
    assert verdict.reason == "ok" and judged["others"] == [1, 0]
    assert verdict.contention and "verified again alone" in verdict.contention[0]
    assert "gpu_wait" in verdict.phase_s


def test_a_timer_inconsistent_beside_others_is_timed_again_alone(judged: dict[str, Any], tmp_path: Path) -> None:
    order: list[str] = []
    neighbour = Holder(judged["ledger"], 1 * GIB, order, "neighbour")
    assert neighbour.admitted.wait(30)
    judged["outcomes"] = [("timing_inconsistent", "exit"), ("timing_inconsistent", "exit")]
    judged["before_first"] = neighbour.release
    verdict = verify.run_worker(_spec(tmp_path), 10.0)  # alone it stays below the bound: a patched timer
    assert verdict.reason == "timing_inconsistent" and judged["others"] == [1, 0]
    assert verdict.contention[0].startswith("timing_inconsistent while 1 other candidate(s)")


def test_out_of_memory_alone_or_of_the_host_stands(judged: dict[str, Any], tmp_path: Path) -> None:
    judged["outcomes"] = [("out_of_memory", "exit")]
    verdict = verify.run_worker(_spec(tmp_path), 10.0)  # nobody else held GPU memory
    assert verdict.reason == "out_of_memory" and judged["others"] == [0] and not verdict.contention
    order: list[str] = []
    neighbour = Holder(judged["ledger"], 1 * GIB, order, "neighbour")
    assert neighbour.admitted.wait(30)
    judged["outcomes"] = [("out_of_memory", "host_memory")]  # the host's memory: no GPU neighbour caused it
    try:
        assert verify.run_worker(_spec(tmp_path), 10.0).reason == "out_of_memory"
    finally:
        neighbour.release()
    assert judged["outcomes"] == []


def test_an_unmeasured_problem_is_admitted_at_the_unknown_estimate(judged: dict[str, Any], tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []
    admitted = judged["ledger"].admitted

    def recording(estimate: int, alone: bool = False) -> AbstractContextManager[Hold]:
        asked.append(estimate)
        return admitted(estimate, alone)

    monkeypatch.setattr(judged["ledger"], "admitted", recording)
    judged["outcomes"] = [("ok", "exit")]
    verify.run_worker(_spec(tmp_path), 10.0)
    assert asked == [estimate_bytes(None)]


@pytest.mark.gpu
def test_the_first_judge_of_a_problem_measures_and_caches_its_reference_peak_on_gpu(tmp_path: Path) -> None:
    from kernelwright.verifier.verify import verify_many

    fixtures = Path(__file__).parent.parent / "fixtures" / "verify"
    cfg = verify.VerifyConfig(problem=str(fixtures / "problems" / "affine.py"),
                              candidate=str(fixtures / "candidates" / "honest_affine.py"), compile_baseline=False,
                              build_cache=str(tmp_path / "builds"))
    assert admission.read_peak(cfg.build_cache, cfg.problem) is None
    verdict = verify_many([cfg], jobs=1)[0]
    assert verdict.correct, verdict.detail
    peak = admission.read_peak(cfg.build_cache, cfg.problem)
    assert peak is not None and 4096 * 256 * 4 <= peak < 1 << 30  # its largest shape's input and output, float32
    assert "gpu_wait" in verdict.phase_s and verdict.contention == []


def test_each_gpu_of_a_host_has_its_own_ledger_and_timing_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Judges on other GPUs neither queue for this one's memory nor wait for its timings."""
    keys = {}
    for visible in ("0", "1", "1,0", "GPU-8f/2a", None):
        if visible is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        keys[visible] = (admission.host_gpu_ledger(), verify.host_timing_lock())
    assert keys[None] == keys["0"]  # unset: the first GPU
    assert keys["1"] == keys["1,0"] and keys["1"][0] != keys["0"][0] and keys["1"][1] != keys["0"][1]
    assert "/" not in Path(keys["GPU-8f/2a"][1]).name and keys["GPU-8f/2a"] != keys["0"]
