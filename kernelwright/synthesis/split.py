"""The held-out split by composition signature, and decontamination against evaluation suites.

- `heldout_signature`: whether a signature is held out, from a hash of (seed, signature) alone, so
  the decision never depends on which other tasks a run drew: a signature held out in a run of
  1,000 tasks is held out in a run of 100,000, and no training task ever shares a held-out
  task's signature.
- `decontaminate`: training tasks whose text overlaps an evaluation problem (the held-out seed
  tasks, the builtin suite, any folder given) at the n-gram level, or whose signature is one an
  evaluation folder declares (`SIGNATURE = "..."` in a synthesized problem file), are removed,
  with the problem they matched.
"""

from __future__ import annotations

import ast
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelwright.decontaminate import build_index, matches, problem_files
from kernelwright.synthesis.task import SynthTask


def heldout_signature(signature: str, seed: int, share: float) -> bool:
    return share > 0 and zlib.crc32(f"{seed}:{signature}".encode()) % 100_000 < share * 100_000


def split_tasks(tasks: Sequence[SynthTask], seed: int, share: float) -> tuple[list[SynthTask], list[SynthTask]]:
    """(train, heldout) by composition signature."""
    train: list[SynthTask] = []
    heldout: list[SynthTask] = []
    for t in tasks:
        (heldout if heldout_signature(t.signature, seed, share) else train).append(t)
    return train, heldout


@dataclass
class Decontamination:
    kept: list[SynthTask] = field(default_factory=list)
    by_ngram: dict[str, str] = field(default_factory=dict)  # task id -> the evaluation problem it overlapped
    by_signature: dict[str, str] = field(default_factory=dict)  # task id -> the signature it shares
    folders: list[str] = field(default_factory=list)


def declared_signatures(folders: Sequence[str | Path]) -> set[str]:
    """The `SIGNATURE` literals of every problem file under `folders` (synthesized problems declare one)."""
    out: set[str] = set()
    for folder in folders:
        for path in problem_files(Path(folder)).values():
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError, OSError):
                continue
            for node in tree.body:
                if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SIGNATURE"
                                                        for t in node.targets):
                    if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                        out.add(node.value.value)
    return out


def decontaminate(tasks: Sequence[SynthTask], ngram_folders: Sequence[str | Path], problems: Mapping[str, str],
                  signatures: set[str], n: int, min_share: float) -> Decontamination:
    """Tasks that overlap none of the problems of `ngram_folders` or `problems` (name -> source)
    by n-grams of reference and solution, and share no signature with `signatures` or with a
    problem of `ngram_folders` that declares one."""
    result = Decontamination(folders=[str(f) for f in ngram_folders])
    banned = set(signatures) | declared_signatures(ngram_folders)
    index = build_index([str(f) for f in ngram_folders], n)
    for name, text in problems.items():
        index.add(name, text)
    for t in tasks:
        if t.signature in banned:
            result.by_signature[t.id] = t.signature
            continue
        hits = matches(index, [t.reference, t.solution], min_share)
        if hits:
            result.by_ngram[t.id] = hits[0][0]
            continue
        result.kept.append(t)
    return result
