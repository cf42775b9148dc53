"""Which problems an evaluation runs on, and the candidate files it verifies for them.

Problems come from a KernelBench-style folder (`--suite DIR`), kernelwright's own suite
(`--suite builtin`), the synthesized data of the work folder (`--suite synth:heldout`,
`--suite infill:heldout`: infill_suite.py), or, by default, the held-out tasks of the seed corpus.
Candidates are files:
`DIR/<problem_id>/sample_<k>.py` (or `DIR/<problem_id>.py` for one sample); generated completions
are written in that layout first, so any evaluation can be rerun from its `generations/` folder. A
folder that holds only the raw answers (`completions.json`, e.g. kept without the files) has its
candidate files written again from them (`from_completions`).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kernelwright import atomic
from kernelwright.errors import UsageError
from kernelwright.evaluation.infill_suite import candidate_text, synth_problems, synth_suite
from kernelwright.seed import load_seed_tasks, split_tasks
from kernelwright.verifier.problems import Problem, load_problem, load_problems
from kernelwright.workdir import resolve_workdir

BUILTIN = "builtin"


def suite_root() -> Path:
    """kernelwright's own problem suite (`--suite builtin`), shipped inside this package."""
    return Path(str(resources.files("kernelwright.evaluation") / "suite"))


SAMPLE_FILE = re.compile(r"^sample_(\d+)\.py$")


@dataclass(frozen=True)
class Candidate:
    problem: Problem
    sample: int
    path: Path | None  # None: no file for this sample (counted as a failure, reason no_candidate)


def select_problems(suite: str | None, split: str, workdir: Path | None = None) -> list[Problem]:
    """The problems of `suite` (a folder, `builtin`, or synth:/infill:<split> of `workdir`, None: the
    default work folder); `suite` None: the seed corpus's `split` tasks."""
    if suite and synth_suite(suite):
        return synth_problems(suite, resolve_workdir(workdir))
    if suite == BUILTIN:
        return load_problems(suite_root())
    if suite:
        return load_problems(Path(suite))
    tasks = load_seed_tasks()
    chosen = split_tasks(tasks)[1] if split == "test" else tasks
    return [dataclasses.replace(load_problem(t.path / "reference.py"), id=t.id, category=t.category) for t in chosen]


def _sample_files(folder: Path, problem: Problem) -> dict[int, Path]:
    sub = folder / problem.id
    if sub.is_dir():
        # regular files only: a FIFO would block its reader, a device never end, a folder is no file
        return {int(m.group(1)): p for p in sub.iterdir() if (m := SAMPLE_FILE.match(p.name)) and p.is_file()}
    single = folder / f"{problem.id}.py"
    return {0: single} if single.is_file() else {}


def candidates_from(folder: Path, problems: list[Problem], samples: int) -> list[Candidate]:
    """`samples` candidates per problem from a generations folder; missing ones have path None."""
    if not folder.is_dir():
        raise UsageError(f"generations folder not found: {folder}")
    out: list[Candidate] = []
    for problem in problems:
        files = _sample_files(folder, problem)
        out += [Candidate(problem, k, files.get(k)) for k in range(samples)]
    if all(c.path is None for c in out):
        raise UsageError(f"no candidate files under {folder} for any of the {len(problems)} problems "
                         f"(expected <problem_id>/sample_<k>.py or <problem_id>.py)")
    return out


COMPLETIONS = "completions.json"


def from_completions(folder: Path, problems: list[Problem], dest: Path) -> Path:
    """The folder to read candidates from: `folder` itself when it holds candidate files (or no
    `completions.json`), else `dest` with the candidate files written from `folder`'s raw answers as
    generation writes them (an infill task's answer spliced into its partial file). Problems without
    answers get no file (`no_candidate`)."""
    raw_path = folder / COMPLETIONS
    if not raw_path.is_file() or any(_sample_files(folder, p) for p in problems):
        return folder
    try:
        raw = json.loads(raw_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"{raw_path}: not readable as JSON ({e})") from None
    if not isinstance(raw, dict) or not all(
            isinstance(v, list) and all(isinstance(t, str) for t in v) for v in raw.values()):
        raise UsageError(f"{raw_path}: expected an object of problem id -> list of completion texts")
    answered = [p for p in problems if p.id in raw]
    if not answered:
        raise UsageError(f"{raw_path}: answers none of the {len(problems)} problems (another suite's answers?)")
    if dest.resolve() != folder.resolve():  # an earlier evaluation's files there would stand in for missing answers
        for problem in problems:
            shutil.rmtree(dest / problem.id, ignore_errors=True)
            (dest / f"{problem.id}.py").unlink(missing_ok=True)
    write_generations(dest, answered, [raw[p.id] for p in answered])
    return dest


def write_generations(folder: Path, problems: list[Problem], completions: list[list[str]]) -> None:
    """Each completion's candidate file (its code: the fenced block, else the raw text; an infill task's
    partial with it spliced in) as `<problem_id>/sample_<k>.py`, and the raw completions beside them in
    `completions.json`."""
    raw: dict[str, list[str]] = {}
    for problem, texts in zip(problems, completions, strict=True):
        raw[problem.id] = texts
        for k, text in enumerate(texts):
            atomic.write_text(folder / problem.id / f"sample_{k}.py", candidate_text(problem, text))
    atomic.write_text(folder / COMPLETIONS, json.dumps(raw, indent=1))
