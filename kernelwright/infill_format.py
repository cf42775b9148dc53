"""Infill tasks: a verified solution with one CUDA-critical region hidden, the prompt, the splice, the folder.

An infill task shows the model a KernelBench-format solution (`ModelNew` + `load_inline`) in which
one region of the CUDA code was replaced by a marker comment (`marker(kind)`), next to the PyTorch
reference, and asks for only the missing code (`infill_messages`). The answer is put back in place
of the marker (`splice`) and the whole file is judged like any candidate. The training target is
the hidden code in one fenced block (`answer_text`); splicing it back gives the solution byte for byte.

A folder of infill tasks (written by the synthesize stage, read by evaluation) holds one folder per
task: `<id>/problem.py` (the reference), `partial.py` (the solution with the marker), `answer.cu`
(the hidden code) and `meta.json` (`write_infill`, `load_infill`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwright import atomic, jsontext
from kernelwright.errors import UsageError
from kernelwright.prompting import SYSTEM_PROMPT, extract_code

REGION_KINDS = ("index_guard", "reduction_loop", "smem_tiling", "launch_config")
KIND_TEXT = {
    "index_guard": "the statements computing the thread's global index and its bounds guard",
    "reduction_loop": "the reduction loop (warp shuffles or a shared-memory tree) with its barriers",
    "smem_tiling": "the shared-memory declarations and the loop that fills the tiles, with its barriers",
    "launch_config": "the host code computing the block and grid sizes and the kernel launch",
}
MARKER = "/* >>> FILL IN: {kind} <<< */"  # the C comment shown in place of the hidden code
MARKER_RE = re.compile(r"/\* >>> FILL IN: ([a-z_]+) <<< \*/")
# what an empty answer, or one that repeats the marker, leaves in the file: a build error, never a silent gap
NO_ANSWER = '\n#error "infill: no code was given for the hidden region"\n'
CATEGORY_PREFIX = "infill:"  # an infill problem's category is infill:<kind>
PROBLEM_FILE, PARTIAL_FILE, ANSWER_FILE, META_FILE = "problem.py", "partial.py", "answer.cu", "meta.json"
_OPEN_FENCE = re.compile(r"```[A-Za-z0-9_+#.-]*[ \t]*\n")
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class InfillTask:
    id: str  # unique and filesystem-safe: "<task_id>__<kind>"
    task_id: str  # the task whose solution it hides a region of
    kind: str  # one of REGION_KINDS
    reference: str  # the problem file (PyTorch Model, KernelBench format)
    partial: str  # the solution with the region replaced by marker(kind), exactly once
    answer: str  # the hidden code: splice(partial, answer_text(answer)) == solution
    signature: str  # the composition signature of the task (held-out split, decontamination)
    family: str


def marker(kind: str) -> str:
    if kind not in REGION_KINDS:
        raise UsageError(f"unknown infill region kind {kind!r}: one of {', '.join(REGION_KINDS)}")
    return MARKER.format(kind=kind)


def marker_kind(partial: str) -> str:
    """The region kind named by the one marker of `partial`; UsageError unless there is exactly one."""
    found = MARKER_RE.findall(partial)
    if len(found) != 1:
        raise UsageError(f"a partial solution holds exactly one infill marker, not {len(found)}")
    return str(found[0])


def infill_category(kind: str) -> str:
    return CATEGORY_PREFIX + kind


def category_kind(category: str) -> str | None:
    """The region kind of an `infill:<kind>` category; None for any other category."""
    return category[len(CATEGORY_PREFIX):] if category.startswith(CATEGORY_PREFIX) else None


def infill_user_message(reference: str, partial: str, kind: str) -> str:
    return (f"This ModelNew for the PyTorch model below is missing one region of its CUDA code: "
            f"{KIND_TEXT.get(kind, kind)}. It was replaced by the line `{marker(kind)}`.\n"
            f"Answer with only the missing code, in one fenced block; it goes in place of that marker.\n\n"
            f"PyTorch model:\n```python\n{reference.strip()}\n```\n\n"
            f"Partial solution:\n```python\n{partial.strip()}\n```")


def infill_messages(reference: str, partial: str, kind: str) -> list[dict[str, str]]:
    """The chat prompt of an infill task: the system prompt of every task, then reference and partial."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": infill_user_message(reference, partial, kind)},
    ]


def answer_text(code: str) -> str:
    """The training target of an infill task: the hidden code in one fenced block."""
    return f"```cuda\n{code.strip()}\n```"


def completion_code(completion: str) -> str:
    """The code of a completion: its first fenced block whatever the language tag, else the raw text."""
    return extract_code(_OPEN_FENCE.sub("```\n", completion, count=1)).strip()


def splice(partial: str, completion: str) -> str:
    """`partial` with its marker replaced by the completion's code. An empty completion, or one that
    holds a marker itself, gives the file without the region and an `#error` where it was (it does not
    build). Model text never raises; a partial without exactly one marker is a UsageError."""
    match = list(MARKER_RE.finditer(partial))
    if len(match) != 1:
        raise UsageError(f"a partial solution holds exactly one infill marker, not {len(match)}")
    code = completion_code(completion)
    if not code or MARKER_RE.search(code):
        code = NO_ANSWER
    m = match[0]
    return partial[:m.start()] + code + partial[m.end():]


def _check_id(task_id: str) -> None:
    if not _SAFE_ID.match(task_id):
        raise UsageError(f"infill task id {task_id!r} is not a plain file name (letters, digits, _ . -)")


def write_infill(tasks: list[InfillTask], folder: Path, verified: Mapping[str, bool] | None = None) -> list[Path]:
    """Each task as `<folder>/<id>/{problem.py, partial.py, answer.cu, meta.json}`, each task folder moved
    into place whole; the task folders, in order. `verified` (by `task_id`): whether the source pair was
    verified on a GPU, written to meta.json as `verified` (curation refuses unverified rows)."""
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise UsageError("infill task ids must be unique")
    folder.mkdir(parents=True, exist_ok=True)  # there even when no solution had a region
    written: list[Path] = []
    for task in tasks:
        _check_id(task.id)
        marker_kind(task.partial)
        meta: dict[str, Any] = {"id": task.id, "task_id": task.task_id, "kind": task.kind,
                                "signature": task.signature, "family": task.family}
        if verified is not None and task.task_id in verified:
            meta["verified"] = bool(verified[task.task_id])

        def fill(tmp: Path, task: InfillTask = task, meta: dict[str, Any] = meta) -> None:
            for name, text in ((PROBLEM_FILE, task.reference), (PARTIAL_FILE, task.partial),
                               (ANSWER_FILE, task.answer)):
                with open(tmp / name, "w", encoding="utf-8", newline="") as f:
                    f.write(text)
            (tmp / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")

        atomic.write_dir(folder / task.id, fill)
        written.append(folder / task.id)
    return written


def _read(path: Path) -> str:
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def load_task(task_dir: Path) -> InfillTask:
    """One task folder written by `write_infill`."""
    missing = [n for n in (PROBLEM_FILE, PARTIAL_FILE, ANSWER_FILE, META_FILE) if not (task_dir / n).is_file()]
    if missing:
        raise UsageError(f"infill task {task_dir} lacks {', '.join(missing)}")
    try:
        meta = jsontext.loads(_read(task_dir / META_FILE))
        fields = {k: str(meta[k]) for k in ("id", "task_id", "kind", "signature", "family")}
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"infill task {task_dir}: meta.json is not a task record ({exc})") from None
    task = InfillTask(reference=_read(task_dir / PROBLEM_FILE), partial=_read(task_dir / PARTIAL_FILE),
                      answer=_read(task_dir / ANSWER_FILE), **fields)
    if task.id != task_dir.name:
        raise UsageError(f"infill task {task_dir}: meta.json names it {task.id!r}")
    if task.kind not in REGION_KINDS or marker_kind(task.partial) != task.kind:
        raise UsageError(f"infill task {task_dir}: its partial's marker does not name its kind {task.kind!r}")
    return task


def load_infill(folder: Path) -> list[InfillTask]:
    """Every task of an infill folder (`write_infill`'s layout), sorted by id."""
    if not folder.is_dir():
        raise UsageError(f"infill folder not found: {folder}")
    tasks = [load_task(d) for d in sorted(folder.iterdir()) if d.is_dir() and not d.name.startswith(".")]
    if not tasks:
        raise UsageError(f"no infill tasks (<id>/{META_FILE}) under {folder}")
    return tasks
