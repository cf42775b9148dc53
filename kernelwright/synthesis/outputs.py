"""What `kernelwright synthesize` writes, in the layouts curation and evaluation read.

    <out>/train/<task_id>/{reference.py, solution.py, meta.json}   the seed layout: `curate --input <out>/train`
    <out>/heldout/<family>/<task_id>.py                           problems: `evaluate --suite synth:heldout`
    <out>/heldout_solutions/<task_id>/{reference.py, solution.py, meta.json}   their verified solutions
    <out>/infill/{train,heldout}/<infill_id>/...                   infill tasks (`--suite infill:heldout`)
    <out>/pairs.parquet                                           one row per task, kept or not, with why
    <out>/manifest.json                                           counts, split, decontamination, provenance

Every pair's meta.json says how it was verified (`verified`, `verified_by`: trusted_batch or
judge, or null for unverified pairs), with the generator's version and seed, the composition
signature and template, and the figures where the pair was timed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelwright import atomic, jsontext
from kernelwright.synthesis.task import SynthTask
from kernelwright.synthesis.trusted_batch import PairCheck

_DTYPE_LINE = re.compile(r"^DTYPE = .*$", re.M)


def with_signature(reference: str, signature: str) -> str:
    """The problem file with a `SIGNATURE` literal after its DTYPE (decontamination reads it)."""
    line = f"SIGNATURE = {json.dumps(signature)}"
    if _DTYPE_LINE.search(reference):
        return _DTYPE_LINE.sub(lambda m: m.group(0) + "\n" + line, reference, count=1)
    return reference.rstrip("\n") + "\n\n" + line + "\n"


def pair_meta(task: SynthTask, check: PairCheck | None, provenance: Mapping[str, Any]) -> dict[str, Any]:
    figures = {} if check is None else {
        k: getattr(check, k) for k in ("runtime_ms", "ref_runtime_ms", "speedup", "custom_kernel_time_share",
                                      "roofline_share", "max_abs_err")}
    return {
        "id": task.id, "category": task.family, "dtype": task.dtype,
        "description": f"{task.family}: {' -> '.join(task.ops) or 'no elementwise ops'}"
                       + (f" then {task.tail}" if task.tail else ""),
        "ops": list(task.ops), "tail": task.tail, "signature": task.signature, "template": task.template,
        "task_seed": task.seed, "verified": check is not None and check.correct,
        "verified_by": check.verified_by if check is not None else None, **figures, **provenance,
    }


def write_pair(folder: Path, task: SynthTask, meta: Mapping[str, Any]) -> None:
    sub = folder / task.id
    sub.mkdir(parents=True, exist_ok=True)
    (sub / "reference.py").write_text(with_signature(task.reference, task.signature), encoding="utf-8")
    (sub / "solution.py").write_text(task.solution, encoding="utf-8")
    (sub / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True), encoding="utf-8")


def write_heldout(folder: Path, tasks: Sequence[SynthTask]) -> None:
    for t in tasks:
        sub = folder / t.family
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"{t.id}.py").write_text(with_signature(t.reference, t.signature), encoding="utf-8")


def write_manifest(out: Path, manifest: Mapping[str, Any]) -> None:
    atomic.write_json(out / "manifest.json", dict(manifest))


def read_manifest(out: Path) -> dict[str, Any]:
    try:
        data = jsontext.loads((out / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}
