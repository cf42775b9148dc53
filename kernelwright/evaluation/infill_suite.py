"""The suites of synthesized data: `--suite synth:<split>` and `--suite infill:<split>`.

    kernelwright evaluate --suite synth:heldout    # <workdir>/synthesize/heldout, a KernelBench-style folder
    kernelwright evaluate --suite infill:heldout   # <workdir>/synthesize/infill/heldout, infill tasks

Both folders are written by `kernelwright synthesize`. An infill task (infill_format.py) is a problem
whose file is its `problem.py`, its id the infill id and its category `infill:<kind>`; its prompt
shows the reference and the partial solution (`infill_messages`), and the candidate of a completion
is the partial with the completion spliced in (`splice`), checked like any other candidate.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from kernelwright.errors import UsageError
from kernelwright.infill_format import (
    PARTIAL_FILE,
    PROBLEM_FILE,
    category_kind,
    infill_category,
    infill_messages,
    load_infill,
    splice,
)
from kernelwright.prompting import extract_code, prompt_messages
from kernelwright.verifier.problems import Problem, load_problem, load_problems

SYNTH, INFILL = "synth:", "infill:"
_SPLIT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def synth_suite(suite: str | None) -> bool:
    """`suite` names a suite of synthesized data (synth:<split> or infill:<split>)."""
    return bool(suite) and str(suite).startswith((SYNTH, INFILL))


def suite_folder(suite: str, workdir: Path) -> Path:
    """The folder `synth:<split>` / `infill:<split>` stands for; UsageError when it is not there."""
    kind, _, split = suite.partition(":")
    if not _SPLIT.match(split):
        raise UsageError(f"--suite {suite}: name a split of the synthesized data, e.g. {kind}:heldout")
    folder = workdir / "synthesize" / split if kind + ":" == SYNTH else workdir / "synthesize" / "infill" / split
    if not folder.is_dir():
        raise UsageError(f"--suite {suite}: no folder {folder}; run `kernelwright synthesize` first")
    return folder


def infill_problems(folder: Path) -> list[Problem]:
    """Each infill task of `folder` as a problem: its problem.py, id the infill id, category infill:<kind>."""
    return [dataclasses.replace(load_problem(folder / t.id / PROBLEM_FILE), id=t.id, category=infill_category(t.kind))
            for t in load_infill(folder)]


def synth_problems(suite: str, workdir: Path) -> list[Problem]:
    folder = suite_folder(suite, workdir)
    return infill_problems(folder) if suite.startswith(INFILL) else load_problems(folder)


def is_infill(problem: Problem) -> bool:
    return category_kind(problem.category) is not None and (problem.path.parent / PARTIAL_FILE).is_file()


def partial_of(problem: Problem) -> str:
    with open(problem.path.parent / PARTIAL_FILE, encoding="utf-8", newline="") as f:
        return f.read()


def problem_prompt(problem: Problem) -> list[dict[str, str]]:
    """The chat prompt of a problem: an infill task's, or the reference alone."""
    reference = problem.path.read_text(encoding="utf-8")
    kind = category_kind(problem.category)
    if kind is not None and is_infill(problem):
        return infill_messages(reference, partial_of(problem), kind)
    return prompt_messages(reference)


def candidate_text(problem: Problem, completion: str) -> str:
    """The candidate file of a completion: an infill task's partial with the completion spliced in, else
    the completion's code (the fenced block, else the raw text)."""
    if is_infill(problem):
        return splice(partial_of(problem), completion)
    return extract_code(completion) or completion


def problem_files(problem: Problem) -> list[Path]:
    """The files a problem is made of (an infill task's partial too): what a suite's digest reads."""
    return [problem.path, problem.path.parent / PARTIAL_FILE] if is_infill(problem) else [problem.path]
