"""Decontamination: n-gram overlap of normalised code with evaluation problems.

    kernelwright curate --input corpus.jsonl --decontaminate-against path/to/KernelBench/level1 --out DIR

Every `*.py` file under each folder is a problem (named by its path relative to the folder,
without `.py`, e.g. `level1/19_ReLU`); files whose name starts with `_` are skipped. A sample
(its prompt and completion together) matches a problem when the share of the problem's distinct
token n-grams (`code_norm.shingles`, n tokens) that also occur in the sample is above
`min_share`; `min_share = 0` flags a sample that shares any one n-gram.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelwright.code_norm import code_tokens, shingles
from kernelwright.errors import UsageError


@dataclass
class EvalIndex:
    n: int
    problems: dict[str, int] = field(default_factory=dict)  # problem name -> its distinct n-grams
    grams: dict[str, list[str]] = field(default_factory=dict)  # n-gram -> problems holding it

    def add(self, name: str, text: str) -> None:
        grams = shingles(code_tokens(text), self.n)
        self.problems[name] = len(grams)
        for g in grams:
            self.grams.setdefault(g, []).append(name)


def problem_files(folder: Path) -> dict[str, Path]:
    if not folder.is_dir():
        raise UsageError(f"--decontaminate-against: folder not found: {folder}")
    files = {p.relative_to(folder).with_suffix("").as_posix(): p for p in sorted(folder.rglob("*.py"))
             if not p.name.startswith("_")}
    if not files:
        raise UsageError(f"--decontaminate-against: no problem files (*.py) under {folder}")
    return files


def build_index(folders: Iterable[str | Path], n: int) -> EvalIndex:
    """Index every problem of every folder (names prefixed with the folder's name when there are several)."""
    paths = [Path(f) for f in folders]
    index = EvalIndex(n=n)
    for folder in paths:
        prefix = f"{folder.name}/" if len(paths) > 1 else ""
        for name, path in problem_files(folder).items():
            try:
                index.add(prefix + name, path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError) as exc:
                raise UsageError(f"--decontaminate-against: cannot read {path}: {exc}") from None
    return index


def matches(index: EvalIndex, texts: Sequence[str], min_share: float) -> list[tuple[str, float]]:
    """(problem, share of its n-grams found in `texts` together) above `min_share`, best first."""
    return gram_matches(index, set().union(*(shingles(code_tokens(t), index.n) for t in texts)), min_share)


def gram_matches(index: EvalIndex, grams: set[str], min_share: float) -> list[tuple[str, float]]:
    """(problem, share of its n-grams among `grams`) above `min_share`, best first: `matches` for
    n-grams the caller made itself (e.g. of C/CUDA text, `code_norm.c_code_tokens`)."""
    hits: Counter[str] = Counter()
    for g in grams:
        hits.update(index.grams.get(g, ()))
    shares = [(p, c / index.problems[p]) for p, c in hits.items() if index.problems[p]]
    return sorted(((p, round(s, 4)) for p, s in shares if s > min_share), key=lambda x: (-x[1], x[0]))


def contaminated(index: EvalIndex, samples: Mapping[str, Sequence[str]], min_share: float) -> dict[str, str]:
    """id -> the best-matching problems ("name (share)", at most three) of every flagged sample.

    A sample is its texts (prompt, completion code), compared together."""
    out: dict[str, str] = {}
    for key, texts in samples.items():
        found = matches(index, texts, min_share)
        if found:
            out[key] = ", ".join(f"{p} ({s:.2f})" for p, s in found[:3])
    return out
