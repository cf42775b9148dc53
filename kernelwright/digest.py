"""A file's sha256, read in chunks (curated Parquet, corpora and checkpoints can be large)."""

from __future__ import annotations

import hashlib
from pathlib import Path

CHUNK_BYTES = 1 << 20


def file_sha256(path: Path) -> str:
    """Hex sha256 of the bytes of `path`."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            h.update(chunk)
    return h.hexdigest()
