"""Decontamination: normalised code n-grams against evaluation problem folders."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from kernelwright.code_norm import code_tokens
from kernelwright.curation.filters import FilterReport, FilterSettings, run_filters
from kernelwright.curation.ingest import ingest, parse_map
from kernelwright.curation.samples import samples_of
from kernelwright.decontaminate import build_index, contaminated, matches
from kernelwright.errors import UsageError
from kernelwright.evaluation.candidates import suite_root
from kernelwright.prompting import extract_code
from kernelwright.seed import load_seed_tasks

ROOT = Path(__file__).resolve().parents[1]
CL1_LIKE = ROOT / "tests" / "fixtures" / "curation" / "cl1_like.jsonl"


def _script():
    spec = importlib.util.spec_from_file_location("kb_folder", ROOT / "scripts" / "kernelbench_folder_from_jsonl.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_code_tokens_ignore_comments_and_whitespace() -> None:
    a = 'import torch\nsrc = r"""\n__global__ void k(float* x) { x[0] = 1; }  // set\n"""\n'
    b = 'import torch   # the import\n\n\nsrc = r"""/* a kernel */\n__global__   void k(float*x){x[0]=1;}\n"""\n'
    assert code_tokens(a) == code_tokens(b)
    assert "set" not in code_tokens(a) and "__global__" in code_tokens(a)
    assert code_tokens("x = (n + 255) // 256") == ["x", "=", "(", "n", "+", "255", ")", "//", "256"]


def test_a_copy_matches_and_independent_kernelbench_format_code_does_not(tmp_path: Path) -> None:
    task, other = load_seed_tasks()[0], load_seed_tasks()[10]
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "1_task.py").write_text(task.reference)
    index = build_index([tmp_path], 13)
    assert matches(index, [task.reference.replace("\n", "\n\n")], 0.5) == [("level1/1_task", 1.0)]
    assert matches(index, [other.reference, other.solution], 0.5) == []
    assert matches(index, [other.reference, other.solution], 0.0)  # boilerplate n-grams are shared
    # the bundled evaluation suite shares little with the seed corpus: at most boilerplate
    suite = build_index([suite_root()], 13)
    assert contaminated(suite, {t.id: [t.reference, t.solution] for t in load_seed_tasks()}, 0.5) == {}


def test_missing_or_empty_folder_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not found"):
        build_index([tmp_path / "nope"], 13)
    with pytest.raises(UsageError, match="no problem files"):
        build_index([tmp_path], 13)


def _cl1_like(path: Path, n: int = 4) -> Path:
    tasks = load_seed_tasks()[::18][:n]
    recs = [{"level_id": 1 + i % 2, "task_id": i + 1, "ref_code": t.reference, "custom_code": t.solution}
            for i, t in enumerate(tasks)]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_a_corpus_against_a_folder_of_its_own_problems_is_all_contaminated(tmp_path: Path) -> None:
    corpus = _cl1_like(tmp_path / "c.jsonl")
    assert _script().main([str(corpus), str(tmp_path / "kb")]) == 0
    names = sorted(p.relative_to(tmp_path / "kb").as_posix() for p in (tmp_path / "kb").rglob("*.py"))
    assert [n.split("_")[0] for n in names] == ["level1/1", "level1/3", "level2/2", "level2/4"]
    frame, _ = ingest([corpus], parse_map(["prompt=ref_code,completion=custom_code"]))
    index = build_index([tmp_path / "kb"], 13)
    texts = {r["id"]: [r["prompt"], extract_code(r["completion"])] for r in frame.iter_rows(named=True)}
    flagged = contaminated(index, texts, 0.5)
    assert sorted(flagged) == sorted(frame["id"])
    for row in frame.iter_rows(named=True):  # each matches its own problem first
        assert flagged[row["id"]].startswith(f"{row['category']}/{row['task_id']}_")
    kept, report = run_filters(samples_of(frame), FilterSettings(cache_dir=tmp_path / "nvrtc", workers=1), flagged)
    assert kept == [] and sorted(report.removed["contaminated"]) == sorted(frame["id"])


def test_a_cuda_l1_like_corpus_is_flagged_against_its_own_problems(tmp_path: Path) -> None:
    """The fixture has CUDA-L1's fields and its kinds of rows (no solution, a try/except fallback,
    torch ops in ModelNew, no kernel, an honest one): every row matches its own reference."""
    assert _script().main([str(CL1_LIKE), str(tmp_path / "kb")]) == 0
    frame, _ = ingest([CL1_LIKE], parse_map(["prompt=ref_code,completion=custom_code"]))
    index = build_index([tmp_path / "kb"], 13)
    texts = {r["id"]: [t for t in (r["prompt"], r["completion"] and extract_code(r["completion"])) if t]
             for r in frame.iter_rows(named=True)}
    flagged = contaminated(index, texts, 0.5)
    assert len(flagged) == frame.height == 10
    errors = frame.filter(frame["parse_error"].is_not_null())
    report = FilterReport(input_rows=frame.height, parse_errors=dict(zip(errors["id"], errors["parse_error"],
                                                                         strict=True)))
    kept, report = run_filters(samples_of(frame), FilterSettings(cache_dir=tmp_path / "nvrtc", nvrtc=False),
                               flagged, report)
    d = report.as_dict()
    assert d["input_rows"] == 10 == d["kept"] + d["parse_errors"]["count"] + sum(
        v["count"] for v in d["removed"].values())
    assert d["flagged"]["fallback_try_except"]["count"] == 2  # the fixture's try/except fallbacks
    assert kept == []
