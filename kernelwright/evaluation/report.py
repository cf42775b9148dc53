"""What an evaluation shows: results.json, the per-category chart, the speedup plot, the console table,
and the names its files and figures go under in the MLflow run.

The console table is laid out for an 80-column terminal: one row per group (all, then each
category), short column names with a legend, and `-` wherever a figure does not apply.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table

from kernelwright import atomic
from kernelwright.evaluation.checking import Row
from kernelwright.evaluation.metrics import FAST_P_GRID, GroupFigures, SuiteFigures
from kernelwright.evaluation.plots import category_groups, speedup_distribution

NOT_APPLICABLE = "-"
ARTIFACT_DIR = "evaluate"  # the results folder's place among the run's artifacts
NOT_APPLICABLE_FILE = f"{ARTIFACT_DIR}/not_applicable.json"  # every figure that does not apply, with its reason
EXTERNAL_CANDIDATES = f"{ARTIFACT_DIR}/candidates"  # candidate files read from outside the results folder
TAG_CHARS = 500
# (figure, column header, format): headers at most 8 characters so 9 columns fit in 80
GPU_COLUMNS = (("samples", "n", "{:.0f}"), ("compile_rate", "compile", "{:.2f}"), ("fast_0", "fast_0", "{:.2f}"),
               ("fast_1", "fast_1", "{:.2f}"), ("own.fast_1", "own_1", "{:.2f}"),
               ("geomean_speedup", "geomean", "{:.2f}x"), ("cheat_rate", "cheat", "{:.2f}"))
CPU_COLUMNS = (("samples", "n", "{:.0f}"), ("compile_rate", "compile", "{:.2f}"), ("cheat_rate", "cheat", "{:.2f}"))
LEGEND = {
    "compile": "compile rate", "fast_0": "correct", "fast_1": "correct and faster than the reference",
    "own_1": "fast_1 of candidates whose own kernels carry the device time",
    "geomean": "geometric-mean speedup of the correct samples",
    "cheat": "rejected as a cheat",
}


def write_report(out: Path, payload: dict[str, Any], figures: SuiteFigures, rows: Sequence[Row], gpu: bool) -> None:
    """results.json (written atomically) and the plots, under `out`."""
    atomic.write_json(out / "results.json", payload)
    keys = ["compile_rate", "fast_0", "fast_1"] if gpu else ["compile_rate"]
    per_cat = {cat: {k: g.values.get(k, 0.0) for k in keys} for cat, g in figures.categories.items()}
    samples = {cat: int(g.values["samples"]) for cat, g in figures.categories.items()}
    title = "per category" + ("" if gpu else " (no CUDA device: compile rate only)")
    category_groups(per_cat, keys, title, out / "per_category.png", samples)
    if gpu:
        speedups = [float(r.verdict.speedup) for r in rows if r.verdict.correct and r.verdict.speedup]
        fast = {p: figures.overall.values[f"fast_p.{p:g}"] for p in FAST_P_GRID}
        speedup_distribution(speedups, fast, out / "speedup_distribution.png")


def read_reasons(out: Path) -> dict[tuple[str, int], str] | None:
    """The judge's reason per (problem, sample) from the results.json `write_report` left in `out` (None: there is
    none); samples without a problem or a sample number are left out."""
    path = out / "results.json"
    if not path.is_file():
        return None
    samples = json.loads(path.read_text()).get("samples") or []
    return {(str(s["problem_id"]), int(s["sample"])): str((s.get("verdict") or {}).get("reason"))
            for s in samples if isinstance(s, dict) and "problem_id" in s and "sample" in s}


def cell(group: GroupFigures, figure: str, fmt: str) -> str:
    value = group.get(figure)
    return NOT_APPLICABLE if value is None else fmt.format(value)


def results_table(figures: SuiteFigures, gpu: bool, no_gpu_reason: str = "") -> Table:
    """A rich table of the figures, overall and per category (for the CLI)."""
    columns = GPU_COLUMNS if gpu else CPU_COLUMNS
    used = [header for _, header, _ in columns if header in LEGEND]
    caption = "; ".join(f"{h}: {LEGEND[h]}" for h in used) + (f"; {NOT_APPLICABLE}: does not apply" if gpu else "")
    title = "evaluation" + ("" if gpu else f" ({no_gpu_reason})")
    table = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("group", no_wrap=True)
    for _, header, _ in columns:
        table.add_column(header, justify="right", no_wrap=True)
    for name, group in {"all": figures.overall, **figures.categories}.items():
        table.add_row(name, *[cell(group, figure, fmt) for figure, _, fmt in columns])
    return table


def not_applicable_note(not_applicable: Mapping[str, str]) -> str:
    """One line for all the figures that do not apply: how many, where they are listed, and each
    reason with its count ('' when every figure applies)."""
    if not not_applicable:
        return ""
    reasons = Counter(not_applicable.values()).most_common()
    line = f"{len(not_applicable)} figures ({NOT_APPLICABLE_FILE}): " + "; ".join(
        reason if len(reasons) == 1 else f"{reason} ({n})" for reason, n in reasons)
    return line if len(line) <= TAG_CHARS else line[: TAG_CHARS - 3] + "..."


def _absolute(path: str | Path) -> Path:
    return Path(os.path.abspath(path))  # no symlink resolution: a linked file keeps its place in the folder


def inside(path: str | Path, folder: Path) -> bool:
    return _absolute(path).is_relative_to(_absolute(folder))


def candidate_artifact(candidate: str, out: Path, generations: Path) -> str:
    """Where a candidate file is among the run's artifacts ('' for a missing one): under `evaluate/`
    when it lies in the results folder `out` (logged whole), else under `evaluate/candidates/` by
    its path in the generations folder."""
    if not candidate:
        return ""
    if inside(candidate, out):
        return f"{ARTIFACT_DIR}/{_absolute(candidate).relative_to(_absolute(out)).as_posix()}"
    return f"{EXTERNAL_CANDIDATES}/{_absolute(candidate).relative_to(_absolute(generations)).as_posix()}"
