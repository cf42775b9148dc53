"""Infill tasks as curation rows: ingestion, the infill prompt, spans in the CUDA answer, filters on the
spliced file, the verified flag, and a corpus of whole pairs and infill rows curated together."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from kernelwright.curation.filters import FilterSettings, run_filters, solution_code
from kernelwright.curation.ingest import ingest, ingest_one
from kernelwright.curation.samples import infill_spans, sample_messages, samples_of
from kernelwright.curation.stage import check_verified
from kernelwright.errors import UsageError
from kernelwright.infill_format import InfillTask, answer_text, marker, write_infill
from kernelwright.seed import load_seed_tasks, seed_root
from kernelwright.synthesis.infill import infill_tasks

SEEDS = {t.id: t for t in load_seed_tasks()}
PAIRS = ("elementwise_leaky_relu", "pooling_global_max")


def _tasks() -> list[InfillTask]:
    return [it for k in PAIRS for it in infill_tasks(k, SEEDS[k].reference, SEEDS[k].solution, f"sig:{k}",
                                                     SEEDS[k].category)]


def _by_id(tasks: list[InfillTask]) -> dict[str, InfillTask]:
    return {t.id: t for t in tasks}


def _whole_pairs(folder: Path) -> Path:
    """The seed layout (`<id>/{reference,solution}.py, meta.json`) of the pairs the infill tasks come from."""
    for k in PAIRS:
        shutil.copytree(seed_root() / k, folder / k)
    return folder


def _filters(tmp_path: Path, **kw: Any) -> FilterSettings:
    return FilterSettings(cache_dir=tmp_path / "nvrtc", workers=1, **kw)


def test_ingest_makes_one_row_per_infill_task(tmp_path: Path) -> None:
    tasks = _tasks()
    assert {t.kind for t in tasks} == {"index_guard", "reduction_loop", "launch_config"}
    write_infill(tasks, tmp_path / "infill" / "train", verified={k: True for k in PAIRS})
    (tmp_path / "infill" / "train" / "broken").mkdir()  # a task folder without its files
    (tmp_path / "infill" / "train" / "broken" / "partial.py").write_text("x = 1\n")
    frame = ingest_one(tmp_path / "infill" / "train", {})
    assert frame.height == len(tasks) + 1
    assert "broken" in frame.filter(pl.col("parse_error").is_not_null())["id"].to_list()
    by_id = _by_id(tasks)
    for row in frame.filter(pl.col("parse_error").is_null()).iter_rows(named=True):
        task = by_id[row["id"]]
        meta = json.loads(row["meta"])
        assert (meta["task_kind"], meta["region_kind"], meta["partial"]) == ("infill", task.kind, task.partial)
        assert meta["verified"] is True and meta["signature"] == task.signature
        assert (row["prompt"], row["completion"]) == (task.reference, answer_text(task.answer))
        assert (row["task_id"], row["category"]) == (task.task_id, task.family)
    write_infill(tasks[:2], tmp_path / "infill" / "heldout", verified={k: True for k in PAIRS})
    nested = ingest_one(tmp_path / "infill", {})  # a folder of split folders: its train split, the split in meta
    assert nested.height == frame.height  # the held-out tasks are never training rows
    assert {json.loads(m).get("split") for m in nested["meta"]} == {"train"}


def test_infill_samples_prompt_with_the_partial_and_answer_with_the_fenced_code(tmp_path: Path) -> None:
    tasks = _tasks()
    write_infill(tasks, tmp_path / "train")
    samples = samples_of(ingest_one(tmp_path / "train", {}))
    assert [s.task_kind for s in samples] == ["infill"] * len(tasks)
    for s in samples:
        task = _by_id(tasks)[s.id]
        system, user = sample_messages(s)
        assert system["role"] == "system" and user["role"] == "user"
        assert marker(task.kind) in user["content"] and task.reference.strip() in user["content"]
        assert task.partial.strip() in user["content"]
        assert s.completion == answer_text(task.answer) and s.completion.startswith("```cuda\n")
        assert solution_code(s) == SEEDS[task.task_id].solution  # the spliced file is the verified solution


def test_spans_are_found_in_the_cuda_answer(tmp_path: Path) -> None:
    by_kind = {t.kind: t for t in _tasks() if t.task_id == "elementwise_leaky_relu"}
    launch = by_kind["launch_config"]
    completion = answer_text(launch.answer)
    spans = infill_spans(launch.partial, completion).spans
    launches = [completion[s.start:s.end] for s in spans if s.kind == "launch_config"]
    assert launches == ["<<<blocks, threads>>>"]
    guard = by_kind["index_guard"]
    completion = answer_text(guard.answer)
    res = infill_spans(guard.partial, completion)
    texts = {(s.kind, completion[s.start:s.end]) for s in res.spans}
    assert ("bounds_guard", "i < n") in texts  # found only with the kernel around the answer
    assert ("global_access", "x[i]") in texts and ("thread_index", "(long long)gridDim.x * blockDim.x") in texts
    assert all(len("```cuda\n") <= s.start < s.end <= len(completion) - len("\n```") for s in res.spans)
    alone = infill_spans(marker("index_guard"), completion)  # no kernel around it: parsed as raw CUDA
    assert {s.kind for s in alone.spans} == {"thread_index"}


def test_filters_check_the_spliced_file(tmp_path: Path) -> None:
    """A broken answer fails NVRTC in its spliced file; an answer that calls a PyTorch op in the host code
    is caught by the torch-compute scan; the whole pair and its infill rows are not duplicates of each other."""
    tasks = _tasks()
    guard = next(t for t in tasks if t.task_id == "elementwise_leaky_relu" and t.kind == "index_guard")
    launch = next(t for t in tasks if t.task_id == "elementwise_leaky_relu" and t.kind == "launch_config")
    broken = replace(guard, id="broken__index_guard", task_id="broken",
                     answer=guard.answer.replace("float v = x[i];", "float v = x[i] + undeclared_q;"))
    torch_op = replace(launch, id="torchop__launch_config", task_id="torchop",
                       answer="y = at::leaky_relu(xc, slope);\n    return y;")
    write_infill([*tasks, broken, torch_op], tmp_path / "infill")
    corpus, _ = ingest([_whole_pairs(tmp_path / "train"), tmp_path / "infill"], {})
    kept, report = run_filters(samples_of(corpus), _filters(tmp_path, near_dup_threshold=2.0))
    assert report.removed["nvrtc_error"] == ["broken__index_guard"]
    assert "undeclared_q" in report.details["nvrtc_error"]["broken__index_guard"]
    assert report.removed["torch_compute_in_cuda"] == ["torchop__launch_config"]
    assert sorted(s.id for s in kept) == sorted([*PAIRS, *(t.id for t in tasks)])
    assert not report.removed["exact_duplicate"]
    twice = replace(guard, id="again__index_guard", task_id="again")  # the same infill task again
    write_infill([*tasks, twice], tmp_path / "again")
    corpus, _ = ingest([_whole_pairs(tmp_path / "pairs"), tmp_path / "again"], {})
    _, report = run_filters(samples_of(corpus), _filters(tmp_path, nvrtc=False))
    assert report.removed["exact_duplicate"] == ["elementwise_leaky_relu__index_guard"]  # "again..." came first
    assert not report.removed["near_duplicate"]


def test_infill_rows_of_unverified_pairs_are_refused(tmp_path: Path) -> None:
    """synthesize's infill folders say `verified` as their pair's meta.json does, and curation refuses the
    rows of pairs that failed (or missed) the GPU check."""
    from kernelwright.synthesis.task import SynthTask
    from kernelwright.synthesis.trusted_batch import PairCheck
    from kernelwright.synthesis.writing import write_infill_splits

    synth = [SynthTask(id=k, family=SEEDS[k].category, ops=(), tail="", dtype="float32", reference=SEEDS[k].reference,
                       solution=SEEDS[k].solution, template="seed", seed=0) for k in PAIRS]
    counts = write_infill_splits(tmp_path / "infill", {"train": synth},
                                 {"elementwise_leaky_relu": PairCheck("elementwise_leaky_relu", "correct"),
                                  "pooling_global_max": PairCheck("pooling_global_max", "wrong_output")})
    assert counts["train"] == len(_tasks())
    corpus, _ = ingest([tmp_path / "infill" / "train"], {})
    verified = {r["task_id"]: json.loads(r["meta"])["verified"] for r in corpus.iter_rows(named=True)}
    assert verified == {"elementwise_leaky_relu": True, "pooling_global_max": False}
    with pytest.raises(UsageError, match=r"3 pair\(s\) were never verified"):
        check_verified(corpus, allow=False)
    check_verified(corpus, allow=True)
    write_infill_splits(tmp_path / "unchecked", {"train": synth[:1]})  # no GPU check at all: unverified
    with pytest.raises(UsageError, match="never verified"):
        check_verified(ingest([tmp_path / "unchecked" / "train"], {})[0], allow=False)


def test_curate_whole_pairs_and_infill_rows_together(tmp_path: Path, tiny_model_dir: Path) -> None:
    from kernelwright.cli import main

    tasks = _tasks()
    write_infill(tasks, tmp_path / "infill" / "train")
    out = tmp_path / "out"
    args = ["curate", "--input", str(_whole_pairs(tmp_path / "train")), "--input", str(tmp_path / "infill" / "train"),
            "--base-model", str(tiny_model_dir), "--out", str(out), "--workdir", str(tmp_path / "wd"),
            "--nvrtc", "false", "--max-length", "8192"]
    assert main(args) == 0
    data = pl.read_parquet(out / "data.parquet")
    assert sorted(data["id"].to_list()) == sorted([*PAIRS, *(t.id for t in tasks)])
    assert data.filter(pl.col("task_kind") == "solution")["region_kind"].null_count() == len(PAIRS)
    infill = data.filter(pl.col("task_kind") == "infill")
    assert sorted(infill["region_kind"].to_list()) == sorted(t.kind for t in tasks)
    from kernelwright.models import load_tokenizer

    tok = load_tokenizer(tiny_model_dir)
    for row in infill.iter_rows(named=True):
        task = _by_id(tasks)[row["id"]]
        prompt = tok.decode(row["input_ids"][:row["prompt_len"]])
        answer = tok.decode([t for t in row["labels"] if t != -100])
        assert marker(task.kind) in prompt and "Partial solution" in prompt
        assert answer.startswith(answer_text(task.answer))  # then the template's end of turn
        assert any(row["sensitive"][row["prompt_len"]:])  # c_t found in the CUDA answer
        kinds = {k for k in row["span_kind"] if k}
        assert kinds and ("launch_config" in kinds) == (task.kind == "launch_config")
    report = json.loads((out / "report.json").read_text())
    assert report["filters"]["kept"] == len(PAIRS) + len(tasks)
