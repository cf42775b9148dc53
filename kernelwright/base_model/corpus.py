"""Pretraining text: code that ships with the installed packages, decontaminated.

    .venv/bin/kernelwright base-model pretrain --size tiny      # pretrains on it
    .venv/bin/python -m kernelwright.base_model.corpus           # what it would read: sources, sizes, licences, digest
    .venv/bin/python -m kernelwright.base_model.corpus 0 --manifest m.json   # and every document with its licence

Sources, those that are installed (`corpus_sources`), chosen to look like what CuSeT scores (torch
extensions: CUDA kernels, C++ host code that checks tensors, a Python module around them): `torch-cuda`,
the files of torch's C++/CUDA headers (`torch/include`) with device code (`__global__`/`__device__`);
`torch-cpp`, the other ones that check tensors (`TORCH_CHECK`); `cuda-runtime`, the headers of the
`nvidia-cuda-runtime` wheel with device code; CuPy's kernels and headers; `torch-nn`, the Python of
`torch.nn` (modules with `__init__` and `forward`); and with the `corpus` extra CUTLASS, CCCL (CUB,
Thrust, libcu++) and FlashInfer's hand-written kernels. Generated code (`ATen/ops`, three quarters of
torch's headers; files that say they are generated) is left out. `--source DIR` replaces them all.
Every document records its licence (SPDX id), listed by `Corpus.manifest`.
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

import argparse
import hashlib
import json
import random
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from kernelwright.base_model.corpus_sources import (
    C_SUFFIXES,
    DEVICE_CODE,
    PY_SUFFIXES,
    SOURCE_NAMES,
    UNKNOWN_LICENCE,
    Source,
    folder_sources,
    installed_sources,
    require_installed,
)
from kernelwright.code_norm import c_code_tokens, code_tokens, shingles
from kernelwright.decontaminate import EvalIndex, build_index, gram_matches
from kernelwright.errors import UsageError

__all__ = ["C_SUFFIXES", "DEVICE_CODE", "PY_SUFFIXES", "Corpus", "Document", "Selection", "Source", "build_corpus",
           "SOURCE_NAMES", "candidates", "decontaminate", "digest_of", "exclusion_folders", "folder_sources",
           "installed_sources", "plan_corpus", "require_installed"]

def exclusion_folders(extra: Sequence[str | Path] = ()) -> list[Path]:
    """The seed corpus, the evaluation suite and any extra evaluation folders."""
    root = Path(str(resources.files("kernelwright")))
    return [root / "seed" / "tasks", root / "evaluation" / "suite", *(Path(f) for f in extra)]


@dataclass(frozen=True)
class Document:
    source: str
    path: str  # relative to the source's root
    text: str
    licence: str = UNKNOWN_LICENCE  # SPDX id (see `Source.licence_of`)

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
        if text is not None and source.keeps(text):
            seen.add(path)
            rel = path.relative_to(source.root).as_posix()
            yield Document(source.name, rel, text, source.licence_of(rel, text))


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

    def manifest(self) -> dict[str, Any]:
        """What the text is made of: per source its documents, characters and licences (documents per SPDX
        id), and every document with its licence; the documents left out as contaminated."""
        sources: dict[str, dict[str, Any]] = {}
        for d in self.documents:
            s = sources.setdefault(d.source, {"documents": 0, "chars": 0, "licences": {}})
            s["documents"] += 1
            s["chars"] += len(d.text)
            s["licences"][d.licence] = s["licences"].get(d.licence, 0) + 1
        return {"digest": self.digest, "documents": len(self.documents), "chars": self.chars, "sources": sources,
                "files": [{"key": d.key, "licence": d.licence, "chars": len(d.text)} for d in self.documents],
                "excluded": self.excluded}


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
        key, problems = next(iter(excluded.items()))
        share = "an n-gram" if min_share == 0 else f"more than {min_share:g} of the n-grams"
        hint = ("; --decontam-min-share 0.5 keeps a document unless it holds more than half of some problem's "
                "n-grams" if min_share == 0 else "")
        raise UsageError(f"decontamination left no pretraining text: all {len(excluded)} documents share {share} "
                         f"of an evaluation problem (e.g. {key}: {problems}){hint}")
    return Corpus(documents=kept, digest=corpus.digest, excluded=excluded)


def build_corpus(sel: Selection, sources: Sequence[Source] | None = None,
                 exclude: Sequence[Path] | None = None) -> Corpus:
    """Plan the corpus and decontaminate it against the exclusion index."""
    exclude = exclusion_folders() if exclude is None else list(exclude)
    return decontaminate(plan_corpus(sel, sources, exclude), build_index(exclude, sel.ngram), sel.min_share)


def main(argv: Sequence[str] | None = None) -> None:
    """Print the installed sources (root, licence, files, characters) and the plan's digest as JSON."""
    parser = argparse.ArgumentParser(prog="python -m kernelwright.base_model.corpus",
                                     description="The pretraining text the installed packages give.")
    parser.add_argument("max_chars", nargs="?", type=int, default=0, help="Characters to take; 0: all.")
    parser.add_argument("--manifest", type=Path, help="Also write the full manifest (every document, its licence).")
    args = parser.parse_args(argv)
    sources = installed_sources()
    plan = plan_corpus(Selection(max_chars=args.max_chars), sources)
    found = plan.manifest()["sources"]
    summary = {s.name: {"root": str(s.root), "licence": s.licence, **found.get(s.name, {})} for s in sources}
    json.dump({"digest": plan.digest, "documents": len(plan.documents), "chars": plan.chars, "sources": summary},
              sys.stdout, indent=2)
    sys.stdout.write("\n")
    if args.manifest:
        args.manifest.write_text(json.dumps(plan.manifest(), indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
