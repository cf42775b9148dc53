"""The watermark: digests of what a retrain learns from, recorded on its MLflow run.

Three digests: the corpus (every input file's bytes, or the seed corpus's, and the curation
settings), the training config (every field that changes the weights) and the base model (every
file of its folder). A finished retrain with the same watermark and the same evaluation scope
(suite, samples, judge version, GPU type, gate view) has nothing new to do: the next one records a
skipped run. File digests are cached by path, size and modification time in
`<workdir>/cache/digests.json`, so a large base model is read once.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kernelwright import atomic, jsontext
from kernelwright.digest import file_sha256

TAG = "kw.retrain."


@dataclass(frozen=True)
class Watermark:
    corpus: str
    train_config: str
    base_model: str

    @property
    def key(self) -> str:
        """One digest over the three: the retrain's identity."""
        return digest_text(f"{self.corpus}:{self.train_config}:{self.base_model}")

    @property
    def curate_key(self) -> str:
        """What the curated data depends on: the corpus and the base model (it scores p_t)."""
        return digest_text(f"{self.corpus}:{self.base_model}")

    def tags(self) -> dict[str, str]:
        return {f"{TAG}watermark": self.key, **{f"{TAG}digest.{k}": v for k, v in asdict(self).items()}}


def digest_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def digest_settings(settings: dict[str, Any]) -> str:
    return digest_text(json.dumps(settings, sort_keys=True, default=str))


class FileDigests:
    """sha256 of files, cached by (resolved path, size, mtime) in one JSON file."""

    def __init__(self, cache_file: Path) -> None:
        self.cache_file = cache_file
        try:
            self.cache: dict[str, str] = jsontext.loads(cache_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.cache = {}
        self.changed = False

    def file(self, path: Path) -> str:
        st = path.stat()
        key = f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}"
        if key not in self.cache:
            self.cache[key] = file_sha256(path)
            self.changed = True
        return self.cache[key]

    def tree(self, root: Path) -> str:
        """Digest of a file, or of a folder's files (relative names and bytes; hidden files left out)."""
        if root.is_file():
            return digest_text(self.file(root))
        files = sorted(p for p in root.rglob("*") if p.is_file() and not any(
            part.startswith(".") for part in p.relative_to(root).parts))
        return digest_text("\n".join(f"{p.relative_to(root).as_posix()}={self.file(p)}" for p in files))

    def save(self) -> None:
        if self.changed:
            atomic.write_json(self.cache_file, self.cache)


def compute_watermark(inputs: list[Path], curate_settings: dict[str, Any], train_settings: dict[str, Any],
                      base_model: Path, cache_file: Path) -> Watermark:
    """The three digests; `inputs` are the corpus files or folders (the seed folder when none is given)."""
    files = FileDigests(cache_file)
    corpus = digest_settings({"inputs": [files.tree(p) for p in inputs], "settings": curate_settings})
    mark = Watermark(corpus=corpus, train_config=digest_settings(train_settings), base_model=files.tree(base_model))
    files.save()
    return mark
