"""`evaluate --generate-only`: candidates and their sampling record, no check; the record keeps the gate's scope."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.cli import closing_line, main
from kernelwright.errors import UsageError
from kernelwright.evaluation import stage
from kernelwright.evaluation.candidates import candidates_from, from_completions, select_problems
from kernelwright.evaluation.registry import EXTERNAL_SAMPLING, sampling_scope
from kernelwright.evaluation.stage import (
    GENERATION_RECORD,
    EvaluateConfig,
    read_generation_record,
    recorded_sampling,
    run_evaluate,
)


def test_generate_only_writes_candidates_and_their_sampling_and_checks_nothing(
        tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stage, "cuda_available", lambda: False)  # the later check: static and NVRTC here
    out = tmp_path / "eval"
    argv = ["evaluate", "--model", str(tiny_model_dir), "--generate-only", "--samples", "2", "--max-new-tokens", "4",
            "--temperature", "0.7", "--seed", "3", "--out", str(out), "--workdir", str(tmp_path / "kw")]
    assert main(argv) == 0
    problems = select_problems(None, "test")
    cands = candidates_from(out / "generations", problems, samples=2)
    assert len(cands) == 2 * len(problems) and all(c.path is not None and c.path.is_file() for c in cands)
    record = json.loads((out / "generations" / GENERATION_RECORD).read_text())
    assert record["temperature"] == 0.7 and record["max_new_tokens"] == 4 and record["seed"] == 3
    assert record["samples"] == 2 and record["problems"] == len(problems) and record["model"] == str(tiny_model_dir)
    assert isinstance(record["heldout_bits_per_char"], float) and record["heldout_bits_per_char"] > 0
    assert sum(record["finish_reasons"].values()) == 2 * len(problems) == sum(
        len(r) for r in record["finish_reason_of"].values())
    assert set(record["finish_reason_of"]) == set(record["new_tokens_of"]) == {p.id for p in problems}
    tokens = [n for row in record["new_tokens_of"].values() for n in row]
    assert len(tokens) == 2 * len(problems) and all(0 <= n <= 4 for n in tokens)
    assert record["new_tokens_mean"] == round(sum(tokens) / len(tokens), 1)
    length = record["finish_reasons"]["length"]  # a completion cut by the budget took all of it
    assert sum(n == 4 for n in tokens) >= length
    assert not (out / "results.json").exists()  # nothing was checked
    assert recorded_sampling(read_generation_record(out / "generations")) == sampling_scope(0.7, 4)
    report = run_evaluate(EvaluateConfig(generations=str(out / "generations"), samples=2, out=str(out),
                                         workdir=str(tmp_path / "kw")))  # checked later, here on a CPU
    assert len(report.rows) == 2 * len(problems)
    results = json.loads((out / "results.json").read_text())
    assert results["generation"] == record  # how they were sampled
    assert report.heldout_bits_per_char == results["heldout_bits_per_char"] == record["heldout_bits_per_char"]
    assert report.finish_reasons == record["finish_reasons"]  # and the closing line says them
    assert f"at the token budget {record['finish_reasons']['length']}," in closing_line(report)


def test_a_folder_without_a_readable_record_is_external(tmp_path: Path) -> None:
    assert recorded_sampling(read_generation_record(tmp_path)) == EXTERNAL_SAMPLING
    (tmp_path / GENERATION_RECORD).write_text("{not json")
    assert recorded_sampling(read_generation_record(tmp_path)) == EXTERNAL_SAMPLING
    (tmp_path / GENERATION_RECORD).write_text(json.dumps({"temperature": "hot", "max_new_tokens": 8}))
    assert recorded_sampling(read_generation_record(tmp_path)) == EXTERNAL_SAMPLING


def test_generate_only_and_generations_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--generate-only makes candidates"):
        EvaluateConfig(generations=str(tmp_path), generate_only=True)


def test_the_held_out_figure_can_be_left_out(tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "eval"
    argv = ["evaluate", "--model", str(tiny_model_dir), "--generate-only", "--max-new-tokens", "2",
            "--heldout-nll", "false", "--out", str(out), "--workdir", str(tmp_path / "kw")]
    assert main(argv) == 0
    assert json.loads((out / "generations" / GENERATION_RECORD).read_text())["heldout_bits_per_char"] is None


def test_raw_answers_alone_are_checked_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A generations folder kept as its completions.json only: the candidate files are written again
    from it under the results folder, as generation wrote them, and checked."""
    monkeypatch.setattr(stage, "cuda_available", lambda: False)
    problems = select_problems(None, "test")
    kept = tmp_path / "kept"
    kept.mkdir()
    answers = {problems[0].id: ["```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    pass\n```"],
               problems[1].id: ["no code at all"]}
    (kept / "completions.json").write_text(json.dumps(answers))
    out = tmp_path / "eval"
    stale = out / "generations" / problems[2].id / "sample_0.py"  # an earlier evaluation's file, not an answer
    stale.parent.mkdir(parents=True)
    stale.write_text("print('old')")
    report = run_evaluate(EvaluateConfig(generations=str(kept), out=str(out), workdir=str(tmp_path / "kw")))
    written = out / "generations" / problems[0].id / "sample_0.py"
    assert written.read_text().startswith("import torch\nclass ModelNew")  # the fenced block's code
    by_problem = {r.problem_id: r for r in report.rows}
    assert by_problem[problems[0].id].candidate == str(written)
    assert by_problem[problems[2].id].candidate == ""  # no answer: no file
    assert json.loads((out / "generations" / "completions.json").read_text()) == answers


@pytest.mark.parametrize(("text", "match"), [("{oops", "not readable as JSON"), ('{"a": "b"}', "problem id -> list"),
                                             ('{"elsewhere": ["x"]}', "answers none of the")])
def test_unusable_raw_answers_are_named(tmp_path: Path, text: str, match: str) -> None:
    (tmp_path / "completions.json").write_text(text)
    with pytest.raises(UsageError, match=match):
        from_completions(tmp_path, select_problems(None, "test"), tmp_path / "out")


def test_generation_metrics_take_what_a_record_holds() -> None:
    assert stage.generation_metrics(None) == {}
    record = {"finish_reasons": {"stop": 3, "length": 1, "loop": 0, "odd": 2}, "new_tokens_mean": 512.5,
              "heldout_bits_per_char": True}  # an unknown reason and a flag that is not a figure are left out
    assert stage.generation_metrics(record) == {"evaluate.finished_stop": 3, "evaluate.finished_length": 1,
                                                "evaluate.finished_loop": 0, "evaluate.new_tokens_mean": 512.5}
