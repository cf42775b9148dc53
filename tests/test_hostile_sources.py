"""The corpus of hostile candidate files (tests/fixtures/hostile) through every check that reads a candidate
on a CPU: each answers with a verdict, a refusal or a usage error, and none raises."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.cuda.candidate_sources import candidate_sources
from kernelwright.cuda.compile_check import check_many
from kernelwright.cuda.compile_result import CompileCheckSettings
from kernelwright.cuda.nvrtc import program
from kernelwright.cuda.static_checks import check_source
from kernelwright.evaluation.candidates import Candidate
from kernelwright.evaluation.checking import pre_verdict
from kernelwright.verifier.problems import load_problem
from kernelwright.verifier.verify import static_verdict
from tests.fixtures.hostile.sources import HOSTILE, SOLUTION

PROBLEM = Path(__file__).parent.parent / "kernelwright" / "seed" / "tasks" / "elementwise_elu" / "reference.py"
NAMES = list(HOSTILE)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _python_rejects(text: str) -> bool:
    """The oracle: Python itself cannot compile the text (then, and only then, it is a syntax error)."""
    try:
        compile(text, "candidate.py", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    return False


@pytest.mark.parametrize("name", NAMES)
def test_the_static_checks_answer_every_hostile_file(name: str) -> None:
    text = _text(HOSTILE[name][0])
    report = check_source(text)
    assert ("syntax_error" in report.reasons) == _python_rejects(text), report.reasons
    candidate_sources(text)
    static_verdict(text)


@pytest.mark.parametrize("name", NAMES)
def test_verify_answers_every_hostile_file_without_a_traceback(name: str, tmp_path: Path, capsys) -> None:
    data, invalid = HOSTILE[name]
    candidate = tmp_path / "candidate.py"
    candidate.write_bytes(data)
    code = main(["verify", "--static", "--problem", str(PROBLEM), "--candidate", str(candidate)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if invalid is not None:
        assert code == 2 and "is not valid Python" in err and invalid in err, err


@pytest.mark.parametrize("name", NAMES)
def test_an_evaluation_gives_every_hostile_file_its_verdict(name: str, tmp_path: Path) -> None:
    data, invalid = HOSTILE[name]
    candidate = tmp_path / "sample_0.py"
    candidate.write_bytes(data)
    verdict = pre_verdict(Candidate(problem=load_problem(PROBLEM), sample=0, path=candidate))
    if invalid is not None:
        assert verdict is not None and verdict.reason == "syntax_error", verdict


def test_the_compile_check_answers_the_whole_corpus_at_once(tmp_path: Path) -> None:
    """The server's and the CPU evaluation's compile check: one result per file, the honest one among them."""
    sources = [_text(data) for data, _ in HOSTILE.values()] + [SOLUTION]
    settings = CompileCheckSettings(cache_dir=tmp_path / "cache", host=False, workers=2, timeout_s=60.0)
    results = check_many(sources, settings)
    assert len(results) == len(sources)
    for name, text, result in zip(HOSTILE, sources, results, strict=False):
        if _python_rejects(text):
            assert not result.ok, name
    assert results[-1].ok or program.nvrtc_version() is None, results[-1]  # the honest file, where NVRTC loads


def test_a_file_past_the_size_limit_is_refused_unread(tmp_path: Path, capsys, monkeypatch) -> None:
    """A candidate of gigabytes once took 6 GB and 20 s of the judge's process to be called invalid."""
    from kernelwright import pysource

    monkeypatch.setattr(pysource, "MAX_SOURCE_BYTES", 1 << 20)
    candidate = tmp_path / "sample_0.py"
    candidate.write_bytes(SOLUTION.encode())
    with open(candidate, "r+b") as f:
        f.truncate((1 << 20) + 1)  # a sparse tail: what is past the limit is never read
    code = main(["verify", "--static", "--problem", str(PROBLEM), "--candidate", str(candidate)])
    err = capsys.readouterr().err
    assert code == 2 and "larger than 1 MiB" in err and "Traceback" not in err, err
    verdict = pre_verdict(Candidate(problem=load_problem(PROBLEM), sample=0, path=candidate))
    assert verdict is not None and verdict.reason == "syntax_error" and "larger than" in verdict.detail
    assert pysource.source_text(candidate) == ""
    candidate.write_bytes(SOLUTION.encode())  # at the limit or under it: read as before
    assert pysource.source_text(candidate) == SOLUTION


@pytest.mark.parametrize("kind", ["fifo", "folder", "device", "dangling"])
def test_a_candidate_that_is_no_regular_file_is_named_as_such(kind: str, tmp_path: Path, capsys) -> None:
    candidate = tmp_path / "candidate.py"
    if kind == "fifo":
        os.mkfifo(candidate)  # reading it would wait forever
    elif kind == "folder":
        candidate.mkdir()
    elif kind == "device":
        candidate.symlink_to("/dev/zero")  # reading it would never end
    else:
        candidate.symlink_to(tmp_path / "gone.py")
    code = main(["verify", "--static", "--problem", str(PROBLEM), "--candidate", str(candidate)])
    err = capsys.readouterr().err
    expected = "file not found" if kind == "dangling" else "is not a regular file"
    assert code == 2 and expected in err and "Traceback" not in err, err


def test_a_generations_folder_with_no_regular_sample_file_counts_it_missing(tmp_path: Path) -> None:
    from kernelwright.evaluation.candidates import candidates_from

    problem = load_problem(PROBLEM)
    sub = tmp_path / problem.id
    sub.mkdir()
    os.mkfifo(sub / "sample_0.py")  # a reader would block on it forever
    (sub / "sample_1.py").mkdir()
    (sub / "sample_2.py").symlink_to("/dev/zero")
    (sub / "sample_3.py").write_text(SOLUTION)
    cands = candidates_from(tmp_path, [problem], samples=4)
    assert [c.path is None for c in cands] == [True, True, True, False]
    assert pre_verdict(cands[0]).reason == "no_candidate"  # type: ignore[union-attr]


def test_a_problem_folder_skips_what_is_no_regular_file(tmp_path: Path) -> None:
    from kernelwright.verifier.problems import load_problems

    (tmp_path / "elu.py").write_text(PROBLEM.read_text())
    os.mkfifo(tmp_path / "fifo.py")
    (tmp_path / "dir.py").mkdir()
    assert [p.path.name for p in load_problems(tmp_path)] == ["elu.py"]
