"""Ingest corpora of (PyTorch reference, CUDA solution) pairs into one schema.

    kernelwright curate --input corpus.jsonl --map prompt=ref_code,completion=custom_code --out DIR

Inputs (each `--input PATH`, any mix):
- JSON Lines (`.jsonl`, `.ndjson`), JSON (`.json`: a list of objects, or an object holding one
  under `data`, `rows`, `records` or `examples`), Parquet (`.parquet`), CSV (`.csv`, all strings);
- a Hugging Face `datasets` folder written by `save_to_disk` (it holds `dataset_info.json` or
  `state.json`; every split of a DatasetDict is read, the split goes to `meta`);
- the bundled seed layout: a folder of `<id>/{reference.py,solution.py,meta.json}` (or a folder
  holding such a `tasks/` folder);
- infill tasks (`kernelwright synthesize`'s `<out>/infill/train`): a folder of `<id>/` folders holding
  `partial.py` and `answer.cu` (`infill_format`), one such task folder, or a folder of split folders
  of them (only its `train` split is read: held-out tasks are evaluation problems; the split goes to
  `meta`). One row per task: the prompt is the
  reference, the completion the fenced CUDA answer (`infill_format.answer_text`), and `meta` holds
  `task_kind: "infill"`, `region_kind` and the `partial` solution (`infill_meta` reads them back),
  with the task's meta.json (its `verified` included); `--map` does not apply to them;
- a KernelBench-style folder of problem and solution files, in either of two layouts:
  `problems/<rel>.py` with `solutions/<rel>.py` (the same relative path, e.g.
  `level1/19_ReLU.py`), or pairs side by side, `<name>.py` with `<name>_solution.py`. A level
  folder (`levelN`) names the category; the file stem names the task.

Every row becomes: id, source, task_id, category, prompt, completion, license, meta (a JSON
string of the row's other fields) and parse_error (null when the row is usable). `--map
field=column,...` picks the input column of a schema field; without it each field tries the
common names in `CANDIDATES`. The completion is the assistant answer exactly as training uses
it: the solution file fenced by `prompting.completion_text` (an already fenced answer is
re-fenced from its first code block). A row whose prompt or completion is missing, empty, not a
string, or whose completion is not a Python file with an import, def or class (the string "None"
is not code), keeps its id and gets a `parse_error`; a
JSONL line that is not JSON does too. A missing mapped column or an unreadable file is a
UsageError.
"""

from __future__ import annotations

import ast
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from kernelwright import jsontext
from kernelwright.errors import UsageError
from kernelwright.infill_format import ANSWER_FILE, META_FILE, PARTIAL_FILE, answer_text, load_task
from kernelwright.prompting import completion_text, extract_code
from kernelwright.pysource import parse_python, syntax_message

log = logging.getLogger(__name__)

FIELDS = ("id", "source", "task_id", "category", "prompt", "completion", "license")
SCHEMA = {**dict.fromkeys(FIELDS, pl.Utf8), "meta": pl.Utf8, "parse_error": pl.Utf8}
CANDIDATES: dict[str, tuple[str, ...]] = {
    "id": ("id", "sample_id", "uid"),
    "source": ("source", "dataset"),
    "task_id": ("task_id", "problem_id", "task", "problem_name", "name"),
    "category": ("category", "level", "level_id", "op_type"),
    "prompt": ("prompt", "ref_code", "reference", "reference_code", "pytorch_code", "problem", "input",
               "question"),
    "completion": ("completion", "custom_code", "solution", "cuda_code", "kernel_code", "response", "output",
                   "answer"),
    "license": ("license", "licence"),
}
REQUIRED = ("prompt", "completion")
JSON_LIST_KEYS = ("data", "rows", "records", "examples")
# a solution file holds at least one of these (a bare `None` or a sentence that parses does not)
CODE_STATEMENTS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class RawRow:
    """One input record before mapping: its 1-based position in the input and its fields (or why not)."""

    n: int
    fields: dict[str, Any]
    error: str | None = None


def parse_map(items: Sequence[str]) -> dict[str, str]:
    """`["prompt=ref_code,completion=custom_code"]` -> {"prompt": "ref_code", "completion": "custom_code"}."""
    mapping: dict[str, str] = {}
    for item in items:
        for pair in filter(None, (p.strip() for p in item.split(","))):
            field, sep, column = pair.partition("=")
            if not sep or not field.strip() or not column.strip():
                raise UsageError(f"--map expects FIELD=COLUMN pairs, not {pair!r}")
            if field.strip() not in FIELDS:
                raise UsageError(f"--map: unknown field {field.strip()!r} (fields: {', '.join(FIELDS)})")
            mapping[field.strip()] = column.strip()
    return mapping


# ---------------------------------------------------------------- readers: path -> raw rows

def _read_jsonl(path: Path) -> Iterator[RawRow]:
    for n, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = jsontext.loads(line)
        except json.JSONDecodeError as exc:
            yield RawRow(n, {}, f"line {n} is not JSON: {exc.msg}")
            continue
        yield RawRow(n, obj) if isinstance(obj, dict) else RawRow(n, {}, f"line {n} is not a JSON object")


def _read_json(path: Path) -> Iterator[RawRow]:
    try:
        data = jsontext.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise UsageError(f"cannot read {path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    if isinstance(data, dict):
        data = next((data[k] for k in JSON_LIST_KEYS if isinstance(data.get(k), list)), data)
    if not isinstance(data, list):
        raise UsageError(f"cannot read {path}: expected a list of objects (or one under {', '.join(JSON_LIST_KEYS)})")
    for n, obj in enumerate(data, start=1):
        yield RawRow(n, obj) if isinstance(obj, dict) else RawRow(n, {}, f"item {n} is not a JSON object")


def _read_frame(path: Path) -> Iterator[RawRow]:
    try:
        frame = pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_csv(path, infer_schema=False)
    except Exception as exc:  # polars raises many kinds for a bad file
        raise UsageError(f"cannot read {path}: {type(exc).__name__}: {exc}") from None
    for n, row in enumerate(frame.iter_rows(named=True), start=1):
        yield RawRow(n, row)


def _read_hf(path: Path) -> Iterator[RawRow]:
    import datasets

    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:  # datasets raises FileNotFoundError, ValueError, ...
        raise UsageError(f"cannot read {path} as a saved Hugging Face dataset: {exc}") from None
    splits = loaded.items() if isinstance(loaded, datasets.DatasetDict) else [(None, loaded)]
    n = 0
    for split, ds in splits:
        for row in ds:
            n += 1
            yield RawRow(n, {**row, "split": split} if split else dict(row))


def _read_seed(tasks: Path) -> Iterator[RawRow]:
    for n, folder in enumerate(sorted(d for d in tasks.iterdir() if (d / "meta.json").is_file()), start=1):
        try:
            meta = jsontext.loads((folder / "meta.json").read_text(encoding="utf-8"))
            task = meta.get("id", folder.name)
            yield RawRow(n, {**meta, "id": task, "task_id": task, "prompt": _read_text(folder / "reference.py"),
                             "completion": _read_text(folder / "solution.py")})
        except (UsageError, json.JSONDecodeError) as exc:
            yield RawRow(n, {"task_id": folder.name}, f"task {folder.name}: {exc}")


def _level_of(rel: Path) -> str | None:
    return next((p for p in rel.parts[:-1] if p.startswith("level") and p[5:].isdigit()), None)


def _kernelbench_pairs(root: Path) -> list[tuple[str, Path | None, Path | None]]:
    """(relative name, problem file, solution file) of a KernelBench-style folder."""
    if (root / "problems").is_dir() and (root / "solutions").is_dir():
        probs = {p.relative_to(root / "problems").with_suffix("").as_posix(): p
                 for p in (root / "problems").rglob("*.py")}
        sols = {p.relative_to(root / "solutions").with_suffix("").as_posix(): p
                for p in (root / "solutions").rglob("*.py")}
    else:
        files = [p for p in root.rglob("*.py") if not p.name.startswith("_")]
        is_sol = {p: p.name.endswith("_solution.py") for p in files}
        sols = {p.relative_to(root).as_posix()[: -len("_solution.py")]: p for p in files if is_sol[p]}
        probs = {p.relative_to(root).with_suffix("").as_posix(): p for p in files if not is_sol[p]}
    return [(name, probs.get(name), sols.get(name)) for name in sorted(set(probs) | set(sols))]


def _read_kernelbench(root: Path) -> Iterator[RawRow]:
    for n, (name, prob, sol) in enumerate(_kernelbench_pairs(root), start=1):
        rel = Path(name)
        fields = {"id": name, "task_id": rel.name, "category": _level_of(Path(name + ".py")) or "", "file": name}
        if prob is None or sol is None:
            yield RawRow(n, fields, f"{name}: no {'problem' if prob is None else 'solution'} file")
            continue
        yield RawRow(n, {**fields, "prompt": _read_text(prob), "completion": _read_text(sol)})


def _is_infill_task(folder: Path) -> bool:
    return (folder / PARTIAL_FILE).is_file() and (folder / ANSWER_FILE).is_file()


def _subdirs(folder: Path) -> list[Path]:
    return sorted(d for d in folder.iterdir() if d.is_dir() and not d.name.startswith("."))


def _infill_task_dirs(root: Path) -> list[tuple[str | None, Path]]:
    """(split, task folder) of an infill input: one task folder, a folder of them, or a folder of split folders."""
    if _is_infill_task(root):
        return [(None, root)]
    dirs = _subdirs(root)
    if any(_is_infill_task(d) for d in dirs):
        return [(None, d) for d in dirs]
    return [(d.name, t) for d in dirs if any(_is_infill_task(x) for x in _subdirs(d)) for t in _subdirs(d)]


def _infill_row(split: str | None, folder: Path, source: str) -> dict[str, Any]:
    """One infill task folder as a schema row (a `parse_error` where the folder is not a task)."""
    row: dict[str, Any] = {**dict.fromkeys(SCHEMA), "id": folder.name, "source": source, "task_id": folder.name}
    where = {"split": split} if split else {}
    try:
        task = load_task(folder)
        meta = jsontext.loads(_read_text(folder / META_FILE))
    except (UsageError, json.JSONDecodeError) as exc:
        return {**row, "meta": json.dumps({"task_kind": "infill", **where}), "parse_error": str(exc)}
    info = {**{k: v for k, v in meta.items() if k not in ("id", "task_id", "kind")}, **where,
            "task_kind": "infill", "region_kind": task.kind, "partial": task.partial}
    return {**row, "id": task.id, "task_id": task.task_id, "category": task.family, "prompt": task.reference,
            "completion": answer_text(task.answer), "meta": json.dumps(info, default=str, sort_keys=True),
            "parse_error": None if task.answer.strip() else f"infill task {folder}: answer.cu is empty"}


def infill_rows(root: Path, source: str) -> list[dict[str, Any]]:
    """Every infill task under `root` (`_infill_task_dirs`) as a schema row, in folder order."""
    found = _infill_task_dirs(root)
    skipped = sorted({s for s, _ in found if s and s != "train"})
    if skipped:  # held-out infill tasks are evaluation problems: never training rows
        log.warning("%s: infill split(s) %s left out (only a folder of split folders' train split is read)",
                    root, ", ".join(skipped))
    return [_infill_row(split, folder, source) for split, folder in found if not split or split == "train"]


def infill_meta(meta: str | None) -> tuple[str, str] | None:
    """(region kind, partial solution) of an ingested row whose meta says `task_kind: "infill"`; else None."""
    try:
        data = jsontext.loads(meta) if meta else {}
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or data.get("task_kind") != "infill":
        return None
    kind, partial = data.get("region_kind"), data.get("partial")
    return (kind, partial) if isinstance(kind, str) and isinstance(partial, str) else None


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None


def detect_format(path: Path) -> str:
    if not path.exists():
        raise UsageError(f"input not found: {path}")
    if path.is_dir():
        if (path / "dataset_info.json").is_file() or (path / "state.json").is_file() \
                or (path / "dataset_dict.json").is_file():
            return "hf"
        if _is_infill_task(path) or any(_is_infill_task(d) or any(_is_infill_task(x) for x in _subdirs(d))
                                        for d in _subdirs(path)):
            return "infill"
        if (path / "tasks").is_dir() or any((d / "meta.json").is_file() for d in path.iterdir() if d.is_dir()):
            return "seed"
        if any(path.rglob("*.py")):
            return "kernelbench"
        raise UsageError(f"cannot tell the format of folder {path}: no saved dataset, seed tasks or *.py files")
    fmt = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".parquet": "parquet", ".csv": "csv"}.get(
        path.suffix.lower())
    if fmt is None:
        raise UsageError(f"unknown input format {path.suffix!r} of {path} (jsonl, json, parquet, csv, or a folder)")
    return fmt


def read_raw(path: Path) -> tuple[str, list[RawRow]]:
    """The format of `path` and its raw rows."""
    fmt = detect_format(path)
    if fmt == "seed":
        path = path / "tasks" if (path / "tasks").is_dir() else path
    if fmt == "infill":
        raise UsageError(f"{path} holds infill tasks: read them with `infill_rows`")
    readers = {"jsonl": _read_jsonl, "json": _read_json, "parquet": _read_frame, "csv": _read_frame,
               "hf": _read_hf, "seed": _read_seed, "kernelbench": _read_kernelbench}
    return fmt, list(readers[fmt](path))


# ---------------------------------------------------------------- mapping: raw rows -> schema

def resolve_columns(columns: set[str], mapping: dict[str, str], path: Path) -> dict[str, str | None]:
    """Input column of each schema field: mapped ones must exist; others take the first candidate present."""
    present = ", ".join(sorted(columns)) or "none"
    resolved: dict[str, str | None] = {}
    for f in FIELDS:
        if f in mapping:
            if mapping[f] not in columns:
                raise UsageError(f"{path}: mapped column {mapping[f]!r} (for {f}) is not in the input; "
                                 f"columns present: {present}")
            resolved[f] = mapping[f]
        else:
            resolved[f] = next((c for c in CANDIDATES[f] if c in columns), None)
    missing = [f for f in REQUIRED if resolved[f] is None]
    if missing:
        raise UsageError(f"{path}: no column for {', '.join(missing)}; pass --map "
                         f"{','.join(f + '=COLUMN' for f in missing)} (columns present: {present})")
    return resolved


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _as_label(column: str | None, value: Any) -> str | None:
    if value is None or column is None:
        return None
    if column.startswith("level") and isinstance(value, int | float) and float(value).is_integer():
        return f"level{int(value)}"
    return str(value)


def _completion(value: Any) -> tuple[str | None, str | None]:
    """(fenced completion, None) or (None, why the value is not a usable completion)."""
    text = _text(value)
    if text is None:
        return None, f"completion is empty or not a string ({type(value).__name__})"
    code = extract_code(text) if "```" in text else text
    try:
        tree = parse_python(code)
    except SyntaxError as exc:
        return None, f"completion is not a Python file ({syntax_message(exc)})"
    if not any(isinstance(n, CODE_STATEMENTS) for n in tree.body):
        return None, f"completion is not code: no import, def or class in {text.strip()[:40]!r}"
    return completion_text(code), None


def normalise_row(raw: RawRow, cols: dict[str, str | None], source: str) -> dict[str, Any]:
    f = raw.fields
    used = {c for c in cols.values() if c is not None}
    value = {k: f.get(c) if c is not None else None for k, c in cols.items()}
    row: dict[str, Any] = {k: _as_label(cols[k], value[k]) for k in FIELDS}
    row["id"] = row["id"] or f"{source}:{raw.n}"
    row["source"] = row["source"] or source
    row["meta"] = json.dumps({k: v for k, v in f.items() if k not in used}, default=str, sort_keys=True)
    error = raw.error
    prompt = _text(value["prompt"])
    row["prompt"] = extract_code(prompt) if prompt and "```" in prompt else prompt
    row["completion"], comp_error = _completion(value["completion"])
    if error is None and row["prompt"] is None:
        error = f"prompt is empty or not a string ({type(value['prompt']).__name__})"
    row["parse_error"] = error or comp_error
    unencodable = [k for k, v in row.items() if isinstance(v, str) and not _encodable(v)]
    if unencodable:  # JSON can spell lone surrogates ("\\udcff"); no Parquet string can hold them
        row.update({k: row[k].encode("utf-8", "replace").decode("utf-8") for k in unencodable})
        row["parse_error"] = row["parse_error"] or f"{unencodable[0]} is not valid Unicode text (a lone surrogate)"
    return row


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def unique_ids(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with every repeated id suffixed `#k` (k: its repeat), so ids stay unique across inputs."""
    dup = frame.with_columns(k=pl.int_range(pl.len()).over("id"))
    if (dup["k"] > 0).any():
        log.warning("%d duplicate ids: suffixed with #k", int((dup["k"] > 0).sum()))
    return dup.with_columns(
        id=pl.when(pl.col("k") > 0).then(pl.col("id") + "#" + pl.col("k").cast(pl.Utf8)).otherwise(pl.col("id"))
    ).drop("k")


def ingest_one(path: Path, mapping: dict[str, str]) -> pl.DataFrame:
    """One input, normalised (rows that failed to parse included, with `parse_error` set)."""
    source = path.stem if path.is_file() else path.name
    if detect_format(path) == "infill":
        rows = infill_rows(path, source)
        log.info("ingested %s (infill): %d rows", path, len(rows))
        return pl.DataFrame(rows, schema=SCHEMA)
    fmt, raws = read_raw(path)
    columns = {c for r in raws for c in r.fields}
    if not raws:
        raise UsageError(f"{path} holds no rows")
    cols = resolve_columns(columns, mapping, path) if columns else dict.fromkeys(FIELDS)
    rows = [normalise_row(r, cols, source) for r in raws]
    log.info("ingested %s (%s): %d rows", path, fmt, len(rows))
    return pl.DataFrame(rows, schema=SCHEMA)


def ingest(paths: Sequence[str | Path], mapping: dict[str, str]
           ) -> tuple[pl.DataFrame, list[tuple[Path, pl.DataFrame]]]:
    """All inputs as one frame (ids unique across inputs) and each input's own frame (for MLflow)."""
    parts = [(Path(p), ingest_one(Path(p), mapping)) for p in paths]
    return unique_ids(pl.concat([f for _, f in parts])), parts
