"""The bundled seed corpus: KernelBench-format tasks with hand-written CUDA solutions.

Each task lives in `kernelwright/seed/tasks/<id>/` as `reference.py` (PyTorch `Model`,
`get_inputs`, `get_init_inputs`), `solution.py` (`ModelNew` built from `__global__` kernels with
`load_inline`) and `meta.json` (id, category, dtype, description). Written by the kernelwright
team from scratch.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kernelwright.errors import UsageError

HELD_OUT_EVERY = 5  # one task in five of each category (by id order) is held out for evaluation


@dataclass(frozen=True)
class SeedTask:
    id: str
    category: str
    dtype: str
    description: str
    reference: str
    solution: str
    path: Path


def seed_root() -> Path:
    return Path(str(resources.files("kernelwright") / "seed" / "tasks"))


def load_task(folder: Path) -> SeedTask:
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        return SeedTask(
            id=meta["id"],
            category=meta["category"],
            dtype=meta["dtype"],
            description=meta["description"],
            reference=(folder / "reference.py").read_text(encoding="utf-8"),
            solution=(folder / "solution.py").read_text(encoding="utf-8"),
            path=folder,
        )
    except (OSError, KeyError, json.JSONDecodeError) as exc:
        raise UsageError(f"seed task {folder} is malformed: {exc}") from None


def load_seed_tasks(root: Path | None = None) -> list[SeedTask]:
    root = root or seed_root()
    return [load_task(d) for d in sorted(root.iterdir()) if (d / "meta.json").is_file()]


def is_held_out(task: SeedTask, tasks: list[SeedTask]) -> bool:
    """Stratified, deterministic split: within each category, ids sorted, every 5th is held out.

    The offset inside each category comes from a CRC of the category name, so the held-out
    tasks are not always the alphabetically first.
    """
    same = sorted(t.id for t in tasks if t.category == task.category)
    offset = zlib.crc32(task.category.encode()) % HELD_OUT_EVERY
    return same.index(task.id) % HELD_OUT_EVERY == offset % min(HELD_OUT_EVERY, len(same))


def split_tasks(tasks: list[SeedTask]) -> tuple[list[SeedTask], list[SeedTask]]:
    train = [t for t in tasks if not is_held_out(t, tasks)]
    test = [t for t in tasks if is_held_out(t, tasks)]
    return train, test
