"""A small synthesize-like output folder for the RL tests, made from seed tasks: training pairs, infill
tasks cut from their solutions, and held-out problems, solutions and infill tasks."""

from __future__ import annotations

import json
from pathlib import Path

from kernelwright.infill_format import InfillTask, marker, write_infill
from kernelwright.seed import SeedTask, load_seed_tasks, split_tasks

INDEX_LINE = "(long long)blockIdx.x * blockDim.x + threadIdx.x;"
TRAIN_IDS = ("elementwise_elu", "elementwise_leaky_relu", "indexing_flip_dim", "math_clamp_pow")
KEPT = ("elementwise_leaky_relu", "indexing_flip_dim", "math_clamp_pow")
HELDOUT_SIGNATURE = "elu|"  # the signature the first training pair shares with a held-out problem


def seed(task_id: str) -> SeedTask:
    (task,) = [t for t in load_seed_tasks() if t.id == task_id]
    return task


def signature_of(task_id: str) -> str:
    return HELDOUT_SIGNATURE if task_id == "elementwise_elu" else f"{task_id}|"


def infill_of(task: SeedTask, task_id: str | None = None, signature: str | None = None) -> InfillTask:
    """An index_guard infill task: the line computing the thread's index hidden behind the marker."""
    lines = task.solution.splitlines(keepends=True)
    (i,) = [n for n, line in enumerate(lines) if line.strip().endswith(INDEX_LINE)][:1]
    task_id = task_id or task.id
    partial = "".join(lines[:i]) + marker("index_guard") + "\n" + "".join(lines[i + 1:])
    return InfillTask(id=f"{task_id}__index_guard", task_id=task_id, kind="index_guard", reference=task.reference,
                      partial=partial, answer=lines[i], signature=signature or signature_of(task_id),
                      family=task.category)


def write_pair(folder: Path, task: SeedTask, task_id: str, signature: str) -> None:
    sub = folder / task_id
    sub.mkdir(parents=True)
    (sub / "reference.py").write_text(task.reference, encoding="utf-8")
    (sub / "solution.py").write_text(task.solution, encoding="utf-8")
    (sub / "meta.json").write_text(json.dumps({"id": task_id, "signature": signature}), encoding="utf-8")


def make_data(root: Path) -> Path:
    """Training items that may be trained on: three pairs and their three infill tasks (`KEPT`); every other
    training item matches something held out (`DROPPED`: the held-out problem's SIGNATURE, a held-out seed task's
    id or reference text, a held-out infill task's id or signature, a held-out solution's signature, the
    manifest's held-out list)."""
    data = root / "synthesize"
    for task_id in TRAIN_IDS:
        write_pair(data / "train", seed(task_id), task_id, signature_of(task_id))
    _, seed_test = split_tasks(load_seed_tasks())
    leaked = seed_test[0]  # a held-out seed task, renamed: caught by its reference text
    write_pair(data / "train", leaked, "synth_renamed_seed", "renamed|")
    write_pair(data / "train", seed("math_horner_poly"), seed_test[1].id, "horner|")  # a held-out seed id
    write_pair(data / "train", seed("math_sincos_atan2"), "synth_sincos", "sincos|")  # held out by its infill task
    write_pair(data / "train", seed("elementwise_gelu_tanh"), "synth_manifest", "from_manifest|")
    write_pair(data / "train", seed("elementwise_softplus"), "synth_solution_signature", "sincos_sol|")
    write_infill([infill_of(seed(t)) for t in TRAIN_IDS] +
                 [infill_of(seed("math_lerp_col_weight"), "synth_lerp", "lerp|")], data / "infill" / "train")
    heldout = data / "heldout" / "elementwise"
    heldout.mkdir(parents=True)
    (heldout / "synth_heldout_elu.py").write_text(seed("elementwise_elu").reference +
                                                  f'\nSIGNATURE = "{HELDOUT_SIGNATURE}"\n', encoding="utf-8")
    write_pair(data / "heldout_solutions", seed("math_sincos_atan2"), "synth_heldout_sol", "sincos_sol|")
    write_infill([infill_of(seed("math_sincos_atan2"), "synth_sincos", "sincos|"),
                  infill_of(seed("math_lerp_col_weight"), "synth_heldout_lerp", "lerp|")], data / "infill" / "heldout")
    (data / "manifest.json").write_text(json.dumps({"signatures": {"heldout": ["from_manifest|"], "train": []}}))
    return data
