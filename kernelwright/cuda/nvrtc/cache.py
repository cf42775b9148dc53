"""Compile results kept by content: one JSON file per key on disk, with an in-process memo in front.

A key (`content_key`) is the SHA-256 of everything that decides a result (the compiler's version,
its options, the sources), so a hit is the result the compile would give again. Files live at
`<cache_dir>/results/<key[:2]>/<key>.json`, written atomically (`kernelwright.atomic`): a reader
sees a whole result or none, whatever runs at the same time. The memo keeps the last `MEMO_SIZE`
results this process read or wrote, per cache folder; with no folder (`cache_dir` None) it is the
only store. Callers keep only definite results (compiled or not, never a compile a limit stopped).
Used by every NVRTC compile (device.py) and by the compile check's two stages (compile_stages.py).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from kernelwright import atomic, jsontext

MEMO_SIZE = 4096
_memo: OrderedDict[tuple[str | None, str], dict[str, Any]] = OrderedDict()
_memo_lock = threading.Lock()


def content_key(*parts: Any) -> str:
    """The SHA-256 of `parts` (JSON-encodable), in a canonical encoding."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def result_path(cache_dir: Path, key: str) -> Path:
    return cache_dir / "results" / key[:2] / f"{key}.json"


def _remember(slot: tuple[str | None, str], data: dict[str, Any]) -> None:
    with _memo_lock:
        _memo[slot] = data
        _memo.move_to_end(slot)
        while len(_memo) > MEMO_SIZE:
            _memo.popitem(last=False)


def get(cache_dir: Path | None, key: str) -> dict[str, Any] | None:
    """The result kept under `key`, or None (absent or unreadable: compile again)."""
    slot = (str(cache_dir) if cache_dir is not None else None, key)
    with _memo_lock:
        hit = _memo.get(slot)
        if hit is not None:
            _memo.move_to_end(slot)
            return dict(hit)
    if cache_dir is None:
        return None
    try:
        data = jsontext.loads(result_path(cache_dir, key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    _remember(slot, data)
    return dict(data)


def put(cache_dir: Path | None, key: str, data: dict[str, Any]) -> None:
    """Keep `data` under `key`: in the memo, and on disk when there is a folder."""
    if cache_dir is not None:
        atomic.write_json(result_path(cache_dir, key), data)
    _remember((str(cache_dir) if cache_dir is not None else None, key), dict(data))
