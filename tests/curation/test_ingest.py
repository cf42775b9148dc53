"""Ingestion: every input format, --map, and the ways input goes wrong."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from kernelwright.curation.ingest import ingest, ingest_one, parse_map
from kernelwright.errors import UsageError
from kernelwright.prompting import completion_text
from kernelwright.seed import load_seed_tasks, seed_root

TASKS = load_seed_tasks()[:3]
RECORDS = [{"level_id": 1, "task_id": i + 1, "ref_code": t.reference, "custom_code": t.solution, "score": 1.5}
           for i, t in enumerate(TASKS)]
CL1_MAP = {"prompt": "ref_code", "completion": "custom_code"}


def _jsonl(path: Path, records: list[dict], extra_lines: tuple[str, ...] = ()) -> Path:
    path.write_text("\n".join([json.dumps(r) for r in records] + list(extra_lines)) + "\n")
    return path


def _check_rows(frame: pl.DataFrame, n: int = len(TASKS)) -> None:
    assert frame.height == n and frame["parse_error"].null_count() == n
    assert frame["id"].n_unique() == n
    for row, task in zip(frame.iter_rows(named=True), TASKS, strict=False):
        assert row["prompt"] == task.reference
        assert row["completion"] == completion_text(task.solution)  # the answer exactly as training sees it


def test_jsonl_with_map(tmp_path: Path) -> None:
    frame = ingest_one(_jsonl(tmp_path / "cl1.jsonl", RECORDS), parse_map(["prompt=ref_code,completion=custom_code"]))
    _check_rows(frame)
    row = frame.row(0, named=True)
    assert (row["id"], row["source"], row["task_id"], row["category"]) == ("cl1:1", "cl1", "1", "level1")
    assert json.loads(row["meta"]) == {"score": 1.5}


def test_default_names_need_no_map(tmp_path: Path) -> None:
    recs = [{"prompt": t.reference, "completion": completion_text(t.solution), "id": t.id} for t in TASKS]
    frame = ingest_one(_jsonl(tmp_path / "c.jsonl", recs), {})
    _check_rows(frame)  # an already fenced completion is kept as the same fenced answer
    assert frame["id"].to_list() == [t.id for t in TASKS]


def test_json_parquet_csv(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text(json.dumps({"data": RECORDS}))
    pl.DataFrame(RECORDS).write_parquet(tmp_path / "c.parquet")
    pl.DataFrame(RECORDS).write_csv(tmp_path / "c.csv")
    for name in ("c.json", "c.parquet", "c.csv"):
        _check_rows(ingest_one(tmp_path / name, CL1_MAP))


def test_hf_saved_dataset(tmp_path: Path) -> None:
    import datasets

    datasets.Dataset.from_list(RECORDS).save_to_disk(str(tmp_path / "ds"))
    _check_rows(ingest_one(tmp_path / "ds", CL1_MAP))
    datasets.DatasetDict({"train": datasets.Dataset.from_list(RECORDS)}).save_to_disk(str(tmp_path / "dd"))
    frame = ingest_one(tmp_path / "dd", CL1_MAP)
    _check_rows(frame)
    assert json.loads(frame["meta"][0])["split"] == "train"


def test_seed_layout() -> None:
    frame = ingest_one(seed_root(), {})
    assert frame.height == len(load_seed_tasks()) and frame["parse_error"].null_count() == frame.height
    assert frame["id"][0] == load_seed_tasks()[0].id and frame["category"][0] == load_seed_tasks()[0].category


def test_kernelbench_layouts(tmp_path: Path) -> None:
    for i, t in enumerate(TASKS):
        layouts = ((tmp_path / "a" / "problems", tmp_path / "a" / "solutions"), (tmp_path / "b", tmp_path / "b"))
        for root, sol in layouts:
            (root / "level1").mkdir(parents=True, exist_ok=True)
            (sol / "level1").mkdir(parents=True, exist_ok=True)
            (root / "level1" / f"{i + 1}_task.py").write_text(t.reference)
            name = f"{i + 1}_task.py" if root != sol else f"{i + 1}_task_solution.py"
            (sol / "level1" / name).write_text(t.solution)
    (tmp_path / "b" / "level1" / "9_orphan.py").write_text(TASKS[0].reference)  # a problem without a solution
    _check_rows(ingest_one(tmp_path / "a", {}))
    frame = ingest_one(tmp_path / "b", {})
    assert frame.filter(pl.col("parse_error").is_null())["category"].to_list() == ["level1"] * 3
    assert frame.filter(pl.col("parse_error").is_not_null())["id"].to_list() == ["level1/9_orphan"]


def test_missing_mapped_column_names_it_and_the_columns_present(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "c.jsonl", RECORDS)
    with pytest.raises(UsageError, match=r"'kernel'.*columns present: custom_code, level_id, ref_code"):
        ingest_one(path, {"prompt": "ref_code", "completion": "kernel"})
    with pytest.raises(UsageError, match="unknown field 'code'"):
        parse_map(["code=x"])


def test_unreadable_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(UsageError, match="bad.jsonl"):
        ingest([bad], CL1_MAP)
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(UsageError, match="bad.parquet"):
        ingest([tmp_path / "bad.parquet"], CL1_MAP)
    with pytest.raises(UsageError, match="input not found"):
        ingest([tmp_path / "missing.jsonl"], CL1_MAP)


def test_bad_rows_are_reported_and_the_rest_kept(tmp_path: Path) -> None:
    records = [*RECORDS, {**RECORDS[0], "custom_code": None}, {**RECORDS[0], "custom_code": "Sorry, I can't."},
               {**RECORDS[0], "custom_code": "None"}]
    path = _jsonl(tmp_path / "c.jsonl", records, ("{not json",))
    frame, parts = ingest([path, path], CL1_MAP)  # the same file twice: ids stay unique
    assert frame["id"].n_unique() == frame.height == 14 and len(parts) == 2
    errors = dict(zip(frame["id"], frame["parse_error"], strict=True))
    assert "empty or not a string" in errors["c:4"]
    assert "not a Python file" in errors["c:5"]
    assert "not code" in errors["c:6"]
    assert "not JSON" in errors["c:7"]
    assert sum(e is None for e in errors.values()) == 6


def test_hostile_rows_are_reported_not_fatal(tmp_path: Path) -> None:
    """JSON may spell a lone surrogate, which no Parquet string holds; a completion may nest past Python's
    parser. Each such row gets its reason; the others are kept."""
    deep = "f = " + "lambda: " * 3000 + "0\n"
    records = [RECORDS[0], {**RECORDS[1], "ref_code": "\udcff" + RECORDS[1]["ref_code"]},
               {**RECORDS[2], "custom_code": deep}]
    frame = ingest_one(_jsonl(tmp_path / "h.jsonl", records, ("[" * 100_000 + "]" * 100_000,)), CL1_MAP)
    errors = dict(zip(frame["id"], frame["parse_error"], strict=True))
    assert errors["h:1"] is None
    assert errors["h:2"] == "prompt is not valid Unicode text (a lone surrogate)"
    assert errors["h:3"] == "completion is not a Python file (nested too deeply for Python's parser)"
    assert errors["h:4"].startswith("line 4 is not JSON: nested more than")
