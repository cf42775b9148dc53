"""Teacher mode: rejection sampling with an OpenAI-compatible engine as the teacher.

For each problem (any folder `kernelwright.verifier.problems.load_problems` reads), the teacher
writes k candidates (`ask_teacher`, teacher_engine.py); the judge verifies them all
(`judge_candidates`: `verify_many` on a GPU); the best correct one (`pick_best`: the own-kernel
view first, then the fastest) becomes a training pair, and a candidate with a cheat reason never
does. `write_pairs` writes the pairs in the seed layout curation reads. Asking again with a newer
champion as the teacher is expert iteration, so each pair records the teacher that wrote it.

    answers = ask_teacher(load_problems(folder), TeacherSettings(url="http://127.0.0.1:8000", k=8))
    pairs = teacher_pairs(problems, answers, lambda items: judge_candidates(items, jobs=8, timeout_s=300))
    write_pairs(pairs, out_folder)
"""

from __future__ import annotations

import ast
import contextlib
import logging
import math
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kernelwright import atomic
from kernelwright.errors import NoCudaDevice, UsageError
from kernelwright.prompting import extract_code
from kernelwright.pysource import parse_python
from kernelwright.synthesis.teacher_engine import (
    API_KEY_ENV,
    ProblemAnswers,
    TeacherAnswers,
    TeacherIdentity,
    TeacherSettings,
    ask_teacher,
)
from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.problems import Problem
from kernelwright.verifier.verdict import REASON_STATUS, Verdict
from kernelwright.verifier.verify import OnDone, cuda_available, verify_many

__all__ = ["API_KEY_ENV", "OWN_KERNEL_SHARE", "ProblemAnswers", "TeacherAnswers", "TeacherIdentity", "TeacherPair",
           "TeacherSettings", "Verify", "ask_teacher", "judge_candidates", "pick_best", "safe_name", "teacher_pairs",
           "write_pairs"]

log = logging.getLogger(__name__)

# the share of device time a correct candidate's own kernels take to count in the own-kernel view
# (the default of evaluate's own_kernel_share: kernelwright/evaluation/config.py)
OWN_KERNEL_SHARE = 0.9
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")

# the judge: (problem, candidate file) items -> one verdict each, in order
Verify = Callable[[Sequence[tuple[Problem, Path]]], list[Verdict]]


@dataclass(frozen=True)
class TeacherPair:
    """One training pair: a problem's reference, the teacher's best correct solution and how the judge saw it.
    `reason_counts`: verdict reasons over all k candidates (candidates the engine never gave: `no_candidate`)."""

    problem_id: str
    category: str
    dtype: str
    description: str
    reference: str
    solution: str
    sample: int  # the chosen candidate's index among the teacher's answers
    speedup: float | None
    runtime_ms: float | None
    custom_kernel_time_share: float | None
    reason_counts: Mapping[str, int]
    judge_version: str
    teacher: TeacherIdentity


def _pickable(v: Verdict) -> bool:
    """Correct, with the reason that goes with it: a cheat reason (status "rejected") never is."""
    return v.status == "correct" and REASON_STATUS.get(v.reason) == "correct"


def pick_best(verdicts: Sequence[Verdict], own_share: float = OWN_KERNEL_SHARE) -> int | None:
    """The index of the best correct verdict of one problem's candidates; None when none is correct.

    Best by the own-kernel view: candidates whose own kernels take at least `own_share` of the device
    time come first; then the highest speedup, the lowest runtime_ms, the highest custom-kernel share,
    the earliest index. A verdict whose reason is a cheat class is never picked, whatever its figures."""

    def rank(i: int) -> tuple[bool, float, float, float, int]:
        v = verdicts[i]
        share = v.custom_kernel_time_share
        return (share is not None and share >= own_share,
                v.speedup if v.speedup is not None and math.isfinite(v.speedup) else -math.inf,
                -v.runtime_ms if v.runtime_ms is not None and math.isfinite(v.runtime_ms) else -math.inf,
                share if share is not None else -math.inf,
                -i)

    correct = [i for i, v in enumerate(verdicts) if _pickable(v)]
    return max(correct, key=rank) if correct else None


def judge_candidates(items: Sequence[tuple[Problem, Path]], jobs: int, timeout_s: float,
                     base: VerifyConfig | None = None, on_done: OnDone | None = None) -> list[Verdict]:
    """The judge's verdict on each (problem, candidate file), in order: `verify_many` (static checks here,
    the rest in worker processes, `jobs` at once) with `base`'s protocol settings and `timeout_s` per
    candidate. No CUDA device: NoCudaDevice (a pair needs a correct verdict, which only a GPU gives)."""
    if not items:
        return []
    if not cuda_available():
        raise NoCudaDevice("teacher mode verifies candidates on a GPU: no CUDA device on this machine")
    cfg = base or VerifyConfig()
    cfgs = [replace(cfg, problem=str(problem.path), candidate=str(path), json=None, static=False,
                    timeout_s=timeout_s) for problem, path in items]
    return verify_many(cfgs, jobs, on_done)


def safe_name(problem_id: str) -> str:
    """A filesystem-safe folder name for a problem id: `level1/19_ReLU` -> `level1__19_ReLU`."""
    name = "__".join(_UNSAFE.sub("_", part) for part in problem_id.split("/") if part.strip(".")).lstrip(".")
    if not name:
        raise UsageError(f"problem id {problem_id!r} gives no folder name")
    return name


def describe(reference: str, problem_id: str) -> str:
    """The first line of the reference Model's docstring, or a line naming the problem."""
    try:
        tree = parse_python(reference)
    except SyntaxError:
        tree = ast.Module(body=[], type_ignores=[])
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    doc = (ast.get_docstring(model) or "") if model is not None else ""
    first = doc.strip().splitlines()[0].strip() if doc.strip() else ""
    return first or f"{problem_id}: a teacher-written, judge-verified solution"


def _write_candidates(problems: Sequence[Problem], answers: TeacherAnswers,
                      scratch: Path) -> list[tuple[Problem, Path]]:
    items: list[tuple[Problem, Path]] = []
    for problem in problems:
        got = answers.of(problem.id)
        for i, text in enumerate(got.texts if got else ()):
            path = scratch / safe_name(problem.id) / f"sample_{i}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(extract_code(text), encoding="utf-8")
            items.append((problem, path))
    return items


def teacher_pairs(problems: Sequence[Problem], answers: TeacherAnswers, verify: Verify,
                  scratch: Path | None = None) -> list[TeacherPair]:
    """One pair per problem whose candidates include a correct one (the best, `pick_best`), in problem order.

    The candidates (the code of each answer) are written under `scratch` (a temporary folder when None)
    and judged together by `verify`; problems the teacher gave no answer are left out."""
    with contextlib.ExitStack() as stack:
        folder = scratch or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kw_teacher_")))
        items = _write_candidates(problems, answers, folder)
        verdicts = verify(items)
        if len(verdicts) != len(items):
            raise UsageError(f"the judge gave {len(verdicts)} verdicts for {len(items)} candidates")
        by_problem: dict[str, list[tuple[Path, Verdict]]] = {}
        for (problem, path), verdict in zip(items, verdicts, strict=True):
            by_problem.setdefault(problem.id, []).append((path, verdict))
        pairs = [pair for p in problems if (pair := _pair(p, answers, by_problem.get(p.id, []))) is not None]
    log.info("teacher pairs: %d of %d problems have a correct candidate", len(pairs), len(problems))
    return pairs


def _pair(problem: Problem, answers: TeacherAnswers, judged: list[tuple[Path, Verdict]]) -> TeacherPair | None:
    verdicts = [v for _, v in judged]
    best = pick_best(verdicts)
    if best is None:
        return None
    counts = Counter(v.reason for v in verdicts)
    if len(verdicts) < answers.k:
        counts["no_candidate"] += answers.k - len(verdicts)
    got = answers.of(problem.id)
    teacher = answers.teacher
    if got is not None and got.version and got.version != teacher.version:
        teacher = replace(teacher, version=got.version)  # the engine reloaded another version meanwhile
    chosen = verdicts[best]
    reference = problem.path.read_text(encoding="utf-8")
    return TeacherPair(problem_id=problem.id, category=problem.category, dtype=problem.dtype,
                       description=describe(reference, problem.id), reference=reference,
                       solution=judged[best][0].read_text(encoding="utf-8"), sample=best, speedup=chosen.speedup,
                       runtime_ms=chosen.runtime_ms, custom_kernel_time_share=chosen.custom_kernel_time_share,
                       reason_counts=dict(sorted(counts.items())), judge_version=chosen.judge_version,
                       teacher=teacher)


def pair_meta(pair: TeacherPair, folder_name: str) -> dict[str, Any]:
    """meta.json of a written pair: the seed fields (id, category, dtype, description) and the provenance."""
    return {"id": folder_name, "problem_id": pair.problem_id, "category": pair.category, "dtype": pair.dtype,
            "description": pair.description, "source": "teacher", "verified": True, "verified_by": "judge",
            "teacher": pair.teacher.to_json(), "sample": pair.sample, "speedup": pair.speedup,
            "runtime_ms": pair.runtime_ms, "custom_kernel_time_share": pair.custom_kernel_time_share,
            "reason_counts": dict(pair.reason_counts), "candidates": sum(pair.reason_counts.values()),
            "judge_version": pair.judge_version}


def write_pairs(pairs: Sequence[TeacherPair], folder: Path) -> list[Path]:
    """Each pair as `<folder>/<safe id>/{reference.py, solution.py, meta.json}` (the seed layout curation
    reads), each folder written whole and moved into place atomically; returns the folders."""
    names = [safe_name(p.problem_id) for p in pairs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise UsageError(f"pairs of different problems would share the folder {repeated[0]} (one pair a problem)")
    written = []
    for pair, name in zip(pairs, names, strict=True):
        def fill(tmp: Path, pair: TeacherPair = pair, name: str = name) -> None:
            (tmp / "reference.py").write_text(pair.reference, encoding="utf-8")
            (tmp / "solution.py").write_text(pair.solution, encoding="utf-8")
            atomic.write_json(tmp / "meta.json", pair_meta(pair, name))

        atomic.write_dir(folder / name, fill)
        written.append(folder / name)
    return written
