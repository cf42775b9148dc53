"""Atomic writes: every file kernelwright produces is written to a temporary name and renamed."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def atomic_path(dest: Path) -> Iterator[Path]:
    """Yield a temporary path beside `dest`; on success it replaces `dest` in one rename. An OSError of making the
    temporary file names `dest`, the path the caller knows."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(dest)) from None
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, dest)
    finally:
        tmp_path.unlink(missing_ok=True)


def write_text(dest: Path, text: str) -> None:
    with atomic_path(dest) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(dest: Path, data: Any) -> None:
    write_text(dest, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def write_dir(dest: Path, fill: Callable[[Path], None]) -> None:
    """Build a directory with `fill(tmpdir)` and move it into place as a whole."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        fill(tmp)
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(dest, old)
            os.replace(tmp, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
