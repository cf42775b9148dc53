"""Teacher mode on a CPU: `kernelwright serve` (scripted backend) as the teacher, a stdlib stub engine for
the failures, and an injected judge that returns fixture verdicts."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kernelwright.errors import NoCudaDevice, UsageError
from kernelwright.prompting import completion_text, extract_code, prompt_messages
from kernelwright.seed import load_seed_tasks, load_task
from kernelwright.synthesis import teacher
from kernelwright.synthesis.teacher import (
    TeacherIdentity,
    TeacherSettings,
    ask_teacher,
    judge_candidates,
    pick_best,
    safe_name,
    teacher_pairs,
    write_pairs,
)
from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.problems import Problem, load_problems
from kernelwright.verifier.verdict import Verdict

READY_S = 120  # the server's imports on a busy 2-core machine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _seed(task_id: str) -> Any:
    return next(t for t in load_seed_tasks() if t.id == task_id)


@pytest.fixture(scope="module")
def problems(tmp_path_factory: pytest.TempPathFactory) -> list[Problem]:
    """Two KernelBench-style problems under level1/: LeakyReLU (ids sort it first) and ELU."""
    folder = tmp_path_factory.mktemp("problems")
    (folder / "level1").mkdir()
    (folder / "level1" / "1_leaky_relu.py").write_text(_seed("elementwise_leaky_relu").reference)
    (folder / "level1" / "2_elu.py").write_text(_seed("elementwise_elu").reference)
    return load_problems(folder)


def _variant(mark: str) -> str:
    """The seed's LeakyReLU solution, marked so the fixture judge knows which it is."""
    return completion_text(_seed("elementwise_leaky_relu").solution + f"\n# variant: {mark}\n")


# the scripted teacher answers these in order: the first problem gets the first three, the second the rest
SCRIPT = ["Here is a fast kernel.\n" + _variant("fast"), _variant("slow"), _variant("cheat"),
          "I cannot write this one.", "```python\ndef broken(:\n```", _variant("compile")]
FIXTURE_VERDICTS = {
    "fast": Verdict.of("ok", runtime_ms=0.5, speedup=2.0, custom_kernel_time_share=0.97, judge_version="8"),
    "slow": Verdict.of("ok", runtime_ms=0.9, speedup=1.1, custom_kernel_time_share=0.95, judge_version="8"),
    "cheat": Verdict.of("fallback_runtime", "2% own kernels", runtime_ms=0.1, speedup=9.0,
                        custom_kernel_time_share=0.02, judge_version="8"),
}


@dataclass
class FixtureJudge:
    """Verdicts by the variant a candidate names; anything else fails to build."""

    seen: list[tuple[str, str]] = field(default_factory=list)  # (problem id, candidate source)

    def __call__(self, items: Sequence[tuple[Problem, Path]]) -> list[Verdict]:
        out = []
        for problem, path in items:
            source = path.read_text()
            self.seen.append((problem.id, source))
            mark = next((m for m in FIXTURE_VERDICTS if f"# variant: {m}" in source), None)
            failed = Verdict.of("compile_error", "nvcc: error", judge_version="8")
            out.append(FIXTURE_VERDICTS[mark] if mark else failed)
        return out


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`kernelwright serve --backend scripted:...` in a subprocess; its base URL once ready."""
    folder = tmp_path_factory.mktemp("serve")
    (folder / "texts.json").write_text(json.dumps(SCRIPT))
    port = _free_port()
    cmd = [sys.executable, "-m", "kernelwright.cli", "serve", "--backend", f"scripted:{folder / 'texts.json'}",
           "--port", str(port), "--no_compile_host", "--compile_cache_dir", str(folder / "cache"),
           "--workdir", str(folder)]
    env = {k: v for k, v in os.environ.items() if k not in ("KERNELWRIGHT_API_KEYS", "MLFLOW_TRACKING_URI")}
    log = folder / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_S
        while True:
            assert proc.poll() is None, f"the server exited: {log.read_text(errors='replace')[-3000:]}"
            assert time.monotonic() < deadline, f"not ready in {READY_S} s: {log.read_text(errors='replace')[-3000:]}"
            try:
                with urllib.request.urlopen(f"{base}/readyz", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(30)


def test_the_fast_correct_candidate_of_the_served_teacher_becomes_the_pair(
        served: str, problems: list[Problem], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(teacher.API_KEY_ENV, raising=False)
    landed: list[str] = []
    settings = TeacherSettings(url=served + "/v1/", k=3, concurrency=1, max_tokens=512, timeout_s=60)
    answers = ask_teacher(problems, settings, on_progress=lambda a: landed.append(a.problem_id))
    assert answers.teacher == TeacherIdentity(served, "scripted", "0")  # the scripted backend serves version 0
    assert sorted(landed) == ["level1/1_leaky_relu", "level1/2_elu"] and answers.errors == {}
    assert [len(a.texts) for a in answers.answers] == [3, 3]

    judge = FixtureJudge()
    pairs = teacher_pairs(problems, answers, judge, scratch=tmp_path / "scratch")
    assert len(judge.seen) == 6 and judge.seen[0] == ("level1/1_leaky_relu", extract_code(SCRIPT[0]))
    (pair,) = pairs  # the ELU problem has no correct candidate: no pair
    assert pair.problem_id == "level1/1_leaky_relu" and pair.sample == 0
    assert pair.solution == extract_code(SCRIPT[0]) and "# variant: fast" in pair.solution
    assert (pair.speedup, pair.runtime_ms, pair.custom_kernel_time_share) == (2.0, 0.5, 0.97)
    assert pair.reason_counts == {"fallback_runtime": 1, "ok": 2}
    assert pair.teacher == TeacherIdentity(served, "scripted", "0")
    assert pair.reference == problems[0].path.read_text()

    (written,) = write_pairs(pairs, tmp_path / "pairs")
    assert written.name == "level1__1_leaky_relu"
    meta = json.loads((written / "meta.json").read_text())
    assert meta["verified"] is True and meta["verified_by"] == "judge" and meta["problem_id"] == pair.problem_id
    assert meta["teacher"] == {"url": served, "model": "scripted", "version": "0"}
    assert meta["speedup"] == 2.0 and meta["reason_counts"] == {"fallback_runtime": 1, "ok": 2}
    task = load_task(written)  # the seed layout, as the seed loader reads it
    assert task.solution == pair.solution and task.category == "level1" and task.dtype == "float32"


def test_curation_ingests_the_written_pairs(tmp_path: Path) -> None:
    from kernelwright.curation.ingest import ingest_one

    write_pairs([_pair("level2/7_elu")], tmp_path)
    frame = ingest_one(tmp_path, {})
    (row,) = frame.to_dicts()
    assert row["parse_error"] is None and row["id"] == "level2__7_elu" and row["category"] == "elementwise"
    assert "class ModelNew" in row["completion"] and json.loads(row["meta"])["teacher"]["model"] == "m"


# ---------------------------------------------------------------- a stub engine for the failures

class StubEngine(ThreadingHTTPServer):
    """An OpenAI-compatible stub: answers by what the user message names, records every body it gets."""

    daemon_threads = True

    def __init__(self, refuse_n: bool = False, fail_on: str = "", garble_on: str = "", busy: int = 0,
                 nest_on: str = "") -> None:
        super().__init__(("127.0.0.1", 0), StubHandler)
        self.refuse_n, self.fail_on, self.garble_on, self.busy = refuse_n, fail_on, garble_on, busy
        self.nest_on = nest_on  # answer JSON nested deeper than Python's parser goes
        self.bodies: list[dict[str, Any]] = []
        self.auth: list[str | None] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class StubHandler(BaseHTTPRequestHandler):
    server: StubEngine

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        if status == 503:
            self.send_header("Retry-After", "0")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(200, json.dumps({"object": "list", "data": [{"id": "stub-model", "object": "model"}]}).encode())

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.bodies.append(body)
            self.server.auth.append(self.headers.get("Authorization"))
        user = body["messages"][-1]["content"]
        with self.server.lock:
            busy, self.server.busy = self.server.busy > 0, self.server.busy - 1
        if busy:
            return self._send(503, b'{"error": "queue full"}')
        if self.server.refuse_n and body.get("n", 1) > 1:
            return self._send(400, b'{"error": {"message": "n > 1 is not supported"}}')
        if self.server.fail_on and self.server.fail_on in user:
            return self._send(500, b'{"error": "engine crashed"}')
        if self.server.garble_on and self.server.garble_on in user:
            return self._send(200, b"<html>not json")
        if self.server.nest_on and self.server.nest_on in user:
            return self._send(200, b"[" * 100_000 + b"]" * 100_000)
        choices = [{"index": i, "message": {"role": "assistant", "content": _variant(f"stub {i}")},
                    "finish_reason": "stop"} for i in range(body.get("n", 1))]
        self._send(200, json.dumps({"object": "chat.completion", "model": body["model"], "choices": choices}).encode())


@pytest.fixture
def stub() -> Iterator[Any]:
    servers: list[StubEngine] = []

    def start(**kw: Any) -> StubEngine:
        server = StubEngine(**kw)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_500_on_one_problem_is_recorded_and_the_rest_continue(stub: Any, problems: list[Problem],
                                                                tmp_path: Path) -> None:
    leaky, elu = problems
    extra = tmp_path / "3_gelu.py"
    shutil.copy(_seed("elementwise_gelu_tanh").path / "reference.py", extra)
    more = [*problems, Problem(id="level1/3_gelu", path=extra, category="elementwise", dtype="float32")]
    deep = tmp_path / "4_hardswish.py"
    shutil.copy(_seed("elementwise_hardswish_bf16").path / "reference.py", deep)
    more.append(Problem(id="level1/4_hardswish", path=deep, category="elementwise", dtype="bfloat16"))
    engine = stub(fail_on="functional.elu(", garble_on="functional.gelu(", nest_on="hardswish")
    answers = ask_teacher(more, TeacherSettings(url=engine.url, k=2, concurrency=3, timeout_s=30))
    assert answers.teacher == TeacherIdentity(engine.url, "stub-model", "unknown")
    errors = answers.errors
    assert set(errors) == {"level1/2_elu", "level1/3_gelu", "level1/4_hardswish"}
    assert "HTTP 500" in errors["level1/2_elu"] and "malformed JSON" in errors["level1/3_gelu"]
    assert "malformed JSON" in errors["level1/4_hardswish"] and "nested more than" in errors["level1/4_hardswish"]
    assert len(answers.of(leaky.id).texts) == 2  # type: ignore[union-attr]

    judge = FixtureJudge()
    pairs = teacher_pairs(more, answers, judge)
    assert {pid for pid, _ in judge.seen} == {leaky.id}  # nothing of the failed problems reaches the judge
    assert pairs == []  # the stub's candidates name no fixture verdict: none correct


def test_an_engine_refusing_n_is_asked_k_times(stub: Any, problems: list[Problem],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(teacher.API_KEY_ENV, "sk-test")
    engine = stub(refuse_n=True)
    answers = ask_teacher(problems[:1], TeacherSettings(url=engine.url, k=3, temperature=0.5, max_tokens=256,
                                                        concurrency=2, timeout_s=30))
    assert answers.errors == {} and len(answers.answers[0].texts) == 3
    assert [b["n"] for b in engine.bodies] == [3, 1, 1, 1]
    first = engine.bodies[0]
    assert first["model"] == "stub-model" and first["temperature"] == 0.5 and first["max_tokens"] == 256
    assert first["messages"] == prompt_messages(problems[0].path.read_text())
    assert set(engine.auth) == {"Bearer sk-test"}


def test_a_busy_engine_is_asked_again_until_the_retries_run_out(stub: Any, problems: list[Problem]) -> None:
    engine = stub(busy=2)
    answers = ask_teacher(problems[:1], TeacherSettings(url=engine.url, k=2, retries=2, timeout_s=30))
    assert answers.errors == {} and len(answers.answers[0].texts) == 2 and len(engine.bodies) == 3
    engine = stub(busy=5)
    answers = ask_teacher(problems[:1], TeacherSettings(url=engine.url, k=2, retries=1, timeout_s=30))
    assert "HTTP 503" in answers.errors[problems[0].id] and len(engine.bodies) == 2


def test_an_unreachable_teacher_is_a_usage_error(problems: list[Problem]) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(UsageError, match=url.replace(".", r"\.")):
        ask_teacher(problems, TeacherSettings(url=url, k=2, timeout_s=5))


@pytest.mark.parametrize("kw", [{"k": 0}, {"k": 2, "temperature": 0.0}, {"url": "127.0.0.1:8000"},
                                {"concurrency": 0}, {"temperature": -1.0}])
def test_bad_settings_are_usage_errors(kw: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        TeacherSettings(**{"url": "http://127.0.0.1:8000", **kw})


# ---------------------------------------------------------------- picking, judging, writing

def test_pick_best_takes_the_fastest_correct_and_never_a_cheat() -> None:
    compile_error = Verdict.of("compile_error", "nvcc: error")
    verdicts = [FIXTURE_VERDICTS["slow"], FIXTURE_VERDICTS["cheat"], compile_error, FIXTURE_VERDICTS["fast"]]
    assert pick_best(verdicts) == 3
    assert pick_best([FIXTURE_VERDICTS["cheat"], compile_error]) is None
    assert pick_best([]) is None
    # a verdict saying correct with a cheat reason is never picked, whatever its figures
    forged = Verdict(status="correct", reason="fallback_decoy", speedup=50.0, runtime_ms=0.01,
                     custom_kernel_time_share=1.0)
    assert pick_best([forged, FIXTURE_VERDICTS["slow"]]) == 1


def test_pick_best_prefers_the_own_kernel_view_then_speed() -> None:
    mixed = Verdict.of("ok", runtime_ms=0.2, speedup=5.0, custom_kernel_time_share=0.5)  # half PyTorch
    own = Verdict.of("ok", runtime_ms=0.8, speedup=1.2, custom_kernel_time_share=0.99)
    assert pick_best([mixed, own]) == 1
    assert pick_best([mixed, own], own_share=0.0) == 0
    untimed = [Verdict.of("ok", runtime_ms=0.7, custom_kernel_time_share=0.95),
               Verdict.of("ok", runtime_ms=0.3, custom_kernel_time_share=0.95)]
    assert pick_best(untimed) == 1  # no speedup: the lower runtime


def test_judge_candidates_builds_one_config_per_candidate(problems: list[Problem], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    got: list[tuple[list[VerifyConfig], int]] = []

    def verify_many(cfgs: Sequence[VerifyConfig], jobs: int, on_done: Any = None) -> list[Verdict]:
        got.append((list(cfgs), jobs))
        return [Verdict.of("ok") for _ in cfgs]

    monkeypatch.setattr(teacher, "cuda_available", lambda: True)
    monkeypatch.setattr(teacher, "verify_many", verify_many)
    items = [(problems[0], tmp_path / "a.py"), (problems[1], tmp_path / "b.py")]
    base = VerifyConfig(seeds=3, json="x.json", static=True)
    verdicts = judge_candidates(items, jobs=4, timeout_s=120.0, base=base)
    assert [v.reason for v in verdicts] == ["ok", "ok"]
    ((cfgs, jobs),) = got
    assert jobs == 4 and [(c.problem, c.candidate) for c in cfgs] == [(str(p.path), str(c)) for p, c in items]
    assert all(c.timeout_s == 120.0 and c.seeds == 3 and c.json is None and not c.static for c in cfgs)
    assert judge_candidates([], jobs=1, timeout_s=1.0) == []
    monkeypatch.setattr(teacher, "cuda_available", lambda: False)
    with pytest.raises(NoCudaDevice):
        judge_candidates(items, jobs=1, timeout_s=1.0)


def _pair(problem_id: str) -> teacher.TeacherPair:
    task = _seed("elementwise_elu")
    return teacher.TeacherPair(problem_id=problem_id, category="elementwise", dtype="float32", description="ELU",
                               reference=task.reference, solution=task.solution, sample=0, speedup=1.5,
                               runtime_ms=0.2, custom_kernel_time_share=1.0, reason_counts={"ok": 1},
                               judge_version="8", teacher=TeacherIdentity("http://t:8000", "m"))


def test_folder_names_are_safe_and_distinct(tmp_path: Path) -> None:
    assert safe_name("level1/19_ReLU") == "level1__19_ReLU"
    assert safe_name("../x y/z") == "x_y__z"
    with pytest.raises(UsageError):
        safe_name("/..")
    with pytest.raises(UsageError, match="share the folder a__b"):
        write_pairs([_pair("a/b"), _pair("a__b")], tmp_path)
    assert not any(tmp_path.iterdir())  # nothing written


def test_writing_again_replaces_a_pair_whole(tmp_path: Path) -> None:
    (first,) = write_pairs([_pair("level1/9_elu")], tmp_path)
    (first / "stale.txt").write_text("from an earlier run")
    (again,) = write_pairs([_pair("level1/9_elu")], tmp_path)
    assert again == first and sorted(p.name for p in again.iterdir()) == ["meta.json", "reference.py", "solution.py"]
    assert [p.name for p in tmp_path.iterdir()] == ["level1__9_elu"]  # no temporary folder left
