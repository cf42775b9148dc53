"""The worker's report is untrusted: whatever lands on the channel becomes a verdict, never an exception."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kernelwright.verifier import verify
from kernelwright.verifier.verdict import JUDGE_VERSION, MalformedReport, ShapeResult, Verdict, parse_report


def _report() -> dict:
    v = Verdict.of("ok", compile_s=1.5, runtime_ms=0.2, ref_runtime_ms=0.4, speedup=2.0,
                   per_shape=[ShapeResult(shape={"n": 4}, correct=True, runtime_ms=0.2, speedup=2.0)],
                   phase_s={"compile": 1.5}, warnings=["w"])
    return json.loads(json.dumps(v.to_json()))


def test_a_verdict_round_trips_and_an_older_one_without_the_new_fields_loads() -> None:
    data = _report()
    assert parse_report(data).to_json() == data
    old = {k: v for k, v in data.items() if k not in ("warnings", "judge_version", "seeds")}
    assert parse_report(old).warnings == [] and parse_report(old).judge_version == ""


@pytest.mark.parametrize("change", [
    {"forged": True},                                   # an extra key (crashed the batch with a TypeError)
    {"speedup": "50"}, {"speedup": math.inf}, {"speedup": True}, {"runtime_ms": [1]},
    {"status": "correct", "reason": "wrong_output"},    # an impossible pair
    {"status": "correct", "reason": "made_up"},
    {"warnings": "x"}, {"phase_s": {"compile": "1"}}, {"seeds": [1.5]},
    {"per_shape": [{"shape": {}, "correct": True, "speedup": 50.0, "extra": 1}]},
    {"per_shape": [{"correct": True}]},                 # a required field missing
    {"per_shape": "all"},
])
def test_malformed_reports_are_refused(change: dict) -> None:
    with pytest.raises(MalformedReport):
        parse_report({**_report(), **change})


@pytest.mark.parametrize("data", [None, [], "ok", 3, {"reason": "ok"}, {}])
def test_a_report_that_is_not_a_verdict_object_is_refused(data: object) -> None:
    with pytest.raises(MalformedReport):
        parse_report(data)


def test_a_malformed_report_is_a_verdict_about_that_candidate() -> None:
    state = {"phase": "timing", "verdict": {**_report(), "extra": "keys"}}
    v = verify._worker_verdict("exited", b"", state, 0, 60.0, 0.0)
    assert v.reason == "malformed_report" and v.status == "runtime_error" and "extra" in v.detail


@pytest.mark.parametrize("text", ["not json", "[1, 2]", "\"verdict\"", "{\"phase\": ", "\xff\xfe"])
def test_garbage_state_files_read_as_no_state(tmp_path: Path, text: str) -> None:
    path = tmp_path / "result.json"
    path.write_bytes(text.encode("utf-8", errors="surrogateescape") if text != "\xff\xfe" else b"\xff\xfe{")
    assert verify._read_state(path) == {}


def test_a_dead_worker_with_a_tampered_state_file_still_gets_a_verdict() -> None:
    state = {"phase": {"nested": 1}, "compile_s": "fast", "phase_s": {"compile": "x", "start": 1.0}}
    v = verify._worker_verdict("exited", b"boom", state, -999, 60.0, 0.0)
    assert v.reason == "crash" and v.compile_s is None and "signal 999" in v.detail
    assert verify._numbers(state["phase_s"]) == {"start": 1.0}


def test_the_judge_stamps_its_version() -> None:
    assert JUDGE_VERSION and isinstance(JUDGE_VERSION, str)
