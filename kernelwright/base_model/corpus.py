"""Pretraining text: code that ships with the installed packages, decontaminated.

    .venv/bin/kernelwright base-model pretrain --size tiny      # pretrains on it
    .venv/bin/python -m kernelwright.base_model.corpus           # what it would read: sources, sizes, digest

Sources, those that are installed, chosen to look like what CuSeT scores (torch extensions: CUDA
kernels, C++ host code that checks tensors, a Python module around them): `torch-cuda`, the files
of torch's C++/CUDA headers (`torch/include`) with device code (`__global__`/`__device__`);
`torch-cpp`, the other ones that check tensors (`TORCH_CHECK`); `cuda-runtime`, the headers of the
`nvidia-cuda-runtime` wheel with device code; CuPy's kernels and headers; and `torch-nn`, the
Python of `torch.nn` (modules with `__init__` and `forward`). The generated operator declarations
(`ATen/ops`, three quarters of torch's headers) are left out. `--source DIR` replaces them all.
Never the seed corpus (its completions are the SFT data) nor the evaluation suite: they, and any
`--decontaminate-against` folder, make the exclusion index of `kernelwright.decontaminate`, and a
document that shares more than `min_share` of any of their n-grams (0: any one n-gram) is left out.

Documents are taken from the sources in turn (the source with the fewest characters taken so far
goes next; within a source, files in a seeded shuffle; a file two sources hold is taken once)
until `max_chars` is reached. The digest covers every candidate document's path and text, the
exclusion files and the selection settings: the same digest means the same pretraining text,
computed without decontaminating again.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from kernelwright.code_norm import c_code_tokens, code_tokens, shingles
from kernelwright.decontaminate import EvalIndex, build_index, gram_matches
from kernelwright.errors import UsageError

C_SUFFIXES = frozenset({".h", ".hpp", ".cuh", ".cu", ".inl", ".cpp", ".cc"})
PY_SUFFIXES = frozenset({".py"})
SKIP = frozenset({"__pycache__"})
TORCH_SKIP = frozenset({"__pycache__", "ops"})  # ATen/ops: generated operator declarations
DEVICE_CODE = r"__global__|__device__"


@dataclass(frozen=True)
class Source:
    name: str
    root: Path
    suffixes: frozenset[str]
    skip_dirs: frozenset[str] = SKIP
    contains: str = ""  # a regular expression a file's text must match ("": any file)

    def files(self) -> list[Path]:
        """Every file of the source with one of its suffixes, outside skipped folders, in path order
        (with `contains`, only those whose text matches it)."""
        out = []
        for top, dirs, names in os.walk(self.root):
            dirs[:] = [d for d in dirs if d not in self.skip_dirs]
            out += [Path(top, n) for n in names if os.path.splitext(n)[1] in self.suffixes]
        return sorted(p for p in out if self._matches(p))

    def _matches(self, path: Path) -> bool:
        if not self.contains:
            return True
        try:
            return re.search(self.contains, path.read_text(encoding="utf-8", errors="replace")) is not None
        except OSError:
            return False


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


def installed_sources() -> list[Source]:
    """The code of the installed packages worth learning from, those present."""
    found: list[Source] = []
    torch_dir = _package_dir("torch")
    if torch_dir and (torch_dir / "include").is_dir():
        found.append(Source("torch-cuda", torch_dir / "include", C_SUFFIXES, TORCH_SKIP, DEVICE_CODE))
        found.append(Source("torch-cpp", torch_dir / "include", C_SUFFIXES, TORCH_SKIP, r"TORCH_CHECK"))
    nvidia = _package_dir("nvidia")
    headers = sorted(nvidia.glob("*/include/cuda_runtime.h")) if nvidia else []
    if headers:
        found.append(Source("cuda-runtime", headers[0].parent, C_SUFFIXES, contains=DEVICE_CODE))
    cupy = _package_dir("cupy")
    if cupy:
        found.append(Source("cupy", cupy, C_SUFFIXES))
    if torch_dir and (torch_dir / "nn").is_dir():
        found.append(Source("torch-nn", torch_dir / "nn", PY_SUFFIXES))
    return found


def folder_sources(folders: Sequence[str | Path]) -> list[Source]:
    """User folders as sources: their C/C++/CUDA and Python files."""
    out = []
    for folder in folders:
        path = Path(folder)
        if not path.is_dir():
            raise UsageError(f"--source: folder not found: {path}")
        out.append(Source(path.name, path, C_SUFFIXES | PY_SUFFIXES))
    return out


def exclusion_folders(extra: Sequence[str | Path] = ()) -> list[Path]:
    """The seed corpus, the evaluation suite and any extra evaluation folders."""
    root = Path(str(resources.files("kernelwright")))
    return [root / "seed" / "tasks", root / "evaluation" / "suite", *(Path(f) for f in extra)]


@dataclass(frozen=True)
class Document:
    source: str
    path: str  # relative to the source's root
    text: str

    @property
    def key(self) -> str:
        return f"{self.source}:{self.path}"

    def code_grams(self, n: int) -> set[str]:
        tokens = code_tokens(self.text) if self.path.endswith(".py") else c_code_tokens(self.text)
        return shingles(tokens, n)


@dataclass(frozen=True)
class Selection:
    """How much to take: `max_chars` in all (0: everything), files over `max_doc_chars` skipped."""

    max_chars: int
    max_doc_chars: int = 200_000
    seed: int = 0
    ngram: int = 13
    min_share: float = 0.0


def _read(path: Path, max_doc_chars: int) -> str | None:
    try:
        if path.stat().st_size > 4 * max_doc_chars:
            return None
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return text if text.strip() and len(text) <= max_doc_chars else None


def _documents(source: Source, sel: Selection, seen: set[Path]) -> Iterator[Document]:
    files = source.files()
    random.Random(f"{sel.seed}:{source.name}").shuffle(files)
    for path in files:
        text = None if path in seen else _read(path, sel.max_doc_chars)
        if text is not None:
            seen.add(path)
            yield Document(source.name, path.relative_to(source.root).as_posix(), text)


def candidates(sources: Sequence[Source], sel: Selection) -> list[Document]:
    """Documents from the sources in turn, the least-taken source first, up to `sel.max_chars`; a file
    that two sources hold is taken once."""
    seen: set[Path] = set()
    streams = {s.name: _documents(s, sel, seen) for s in sources}
    taken = dict.fromkeys(streams, 0)
    out: list[Document] = []
    total = 0
    while streams and (sel.max_chars <= 0 or total < sel.max_chars):
        name = min(streams, key=lambda k: (taken[k], k))
        doc = next(streams[name], None)
        if doc is None:
            del streams[name]
            continue
        out.append(doc)
        taken[name] += len(doc.text)
        total += len(doc.text)
    return out


def digest_of(docs: Sequence[Document], exclude: Sequence[Path], sel: Selection) -> str:
    h = hashlib.sha256(repr(sel).encode())
    for doc in docs:
        h.update(doc.key.encode() + b"\0" + doc.text.encode() + b"\1")
    for folder in exclude:
        for path in sorted(folder.rglob("*.py")):
            h.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\2")
    return h.hexdigest()


@dataclass
class Corpus:
    """The pretraining text: the documents kept, those left out as contaminated, and the digest."""

    documents: list[Document]
    digest: str
    excluded: dict[str, str] = field(default_factory=dict)  # document key -> matched problems

    @property
    def chars(self) -> int:
        return sum(len(d.text) for d in self.documents)

    def by_source(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for d in self.documents:
            out[d.source] = out.get(d.source, 0) + len(d.text)
        return out


def plan_corpus(sel: Selection, sources: Sequence[Source] | None = None,
                exclude: Sequence[Path] | None = None) -> Corpus:
    """The candidate documents and their digest (not yet decontaminated: see `decontaminate`)."""
    sources = installed_sources() if sources is None else list(sources)
    exclude = exclusion_folders() if exclude is None else list(exclude)
    docs = candidates(sources, sel)
    if not docs:
        raise UsageError("no pretraining text found: no readable code file in "
                         + ", ".join(str(s.root) for s in sources))
    return Corpus(documents=docs, digest=digest_of(docs, exclude, sel))


def decontaminate(corpus: Corpus, index: EvalIndex, min_share: float) -> Corpus:
    """The corpus without every document that shares more than `min_share` of some problem's n-grams."""
    kept, excluded = [], {}
    for doc in corpus.documents:
        found = gram_matches(index, doc.code_grams(index.n), min_share)
        if found:
            excluded[doc.key] = ", ".join(f"{p} ({s:.2f})" for p, s in found[:3])
        else:
            kept.append(doc)
    if not kept:
        raise UsageError(f"decontamination left no pretraining text ({len(excluded)} documents excluded)")
    return Corpus(documents=kept, digest=corpus.digest, excluded=excluded)


def build_corpus(sel: Selection, sources: Sequence[Source] | None = None,
                 exclude: Sequence[Path] | None = None) -> Corpus:
    """Plan the corpus and decontaminate it against the exclusion index."""
    exclude = exclusion_folders() if exclude is None else list(exclude)
    return decontaminate(plan_corpus(sel, sources, exclude), build_index(exclude, sel.ngram), sel.min_share)


if __name__ == "__main__":
    import json
    import sys

    plan = plan_corpus(Selection(max_chars=int(sys.argv[1]) if len(sys.argv) > 1 else 0))
    json.dump({"digest": plan.digest, "documents": len(plan.documents), "chars": plan.chars,
               "by_source": plan.by_source()}, sys.stdout, indent=2)
