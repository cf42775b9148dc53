"""The RL curriculum: phase 1 infill tasks, phase 2 whole problems, never a held-out one.

    curriculum = load_curriculum(Path(".kernelwright/synthesize"))  # (infill, whole), held-out items removed
    kept, aside = set_aside(curriculum, cfg)                         # --eval-items: judged, never trained on
    train = rows(curriculum_items(kept, cfg))                        # one prompt row per (step, prompt)

A synthesize output folder holds
- `infill/train/<id>/{problem.py, partial.py, answer.cu, meta.json}` (infill_format's layout): phase 1;
- `train/<id>/{reference.py, solution.py, meta.json}`: phase 2 (the reference is the prompt);
- `heldout/<family>/<id>.py`, `heldout_solutions/<id>/`, `infill/heldout/<id>/`: evaluation only.

Held out, by composition signature and by id: every signature of the held-out folders (a `SIGNATURE`
literal, a meta.json's `signature`) and of the manifest's held-out list, every held-out id (and the
task an infill task was cut from), and the seed corpus's held-out tasks (`kernelwright.seed.split_tasks`:
their ids and their reference text). A training item that matches any of them is dropped, and counted.

The rows go to the trainer in order (no shuffle): the first `phase1_steps x prompts_per_step` rows
are infill tasks, the rest whole problems, each phase's items (or `--items-per-phase` of them, drawn
once by the seed) shuffled by the seed and cycled. A longer run of the same config and data starts
with the same rows, so a resumed run that was given more steps continues where it stopped.
"""

from __future__ import annotations

import ast
import logging
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelwright import jsontext
from kernelwright.errors import UsageError
from kernelwright.infill_format import META_FILE, infill_messages, load_infill, load_task
from kernelwright.prompting import prompt_messages
from kernelwright.pysource import parse_python
from kernelwright.rl.config import RLConfig
from kernelwright.seed import load_seed_tasks, split_tasks

log = logging.getLogger(__name__)
INFILL, WHOLE = "infill", "whole"
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class RLItem:
    """One training prompt's task: its reference (the problem file) and, for infill, the partial solution."""

    id: str
    task_id: str  # the task it comes from (an infill item's solution's task; its own id for a whole problem)
    phase: str  # INFILL or WHOLE
    kind: str  # the infill region kind, or WHOLE
    signature: str  # the composition signature ("" when the item has none)
    reference: str
    partial: str = ""  # infill only: the solution with its marker

    def messages(self) -> list[dict[str, str]]:
        if self.phase == INFILL:
            return infill_messages(self.reference, self.partial, self.kind)
        return prompt_messages(self.reference)


@dataclass
class HeldOut:
    """What no training phase may hold."""

    signatures: set[str] = field(default_factory=set)
    ids: set[str] = field(default_factory=set)
    texts: set[str] = field(default_factory=set)  # references with whitespace collapsed

    def holds(self, item: RLItem) -> str:
        """Why `item` is held out ("" when it is not)."""
        if item.signature and item.signature in self.signatures:
            return f"signature {item.signature}"
        for name in (item.id, item.task_id):
            if name in self.ids:
                return f"id {name}"
        return "seed held-out reference" if _norm(item.reference) in self.texts else ""


@dataclass
class Curriculum:
    infill: list[RLItem]
    whole: list[RLItem]
    dropped: dict[str, str] = field(default_factory=dict)  # item id -> why it is held out


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def declared_signature(source: str) -> str:
    """The `SIGNATURE = "..."` literal of a synthesized problem file ("" when it has none)."""
    try:
        tree = parse_python(source)
    except SyntaxError:
        return ""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SIGNATURE" for t in node.targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return node.value.value
    return ""


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = jsontext.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def held_out(data: Path) -> HeldOut:
    """Every signature, id and seed reference that is held out from training (module docstring)."""
    out = HeldOut()
    manifest = _read_json(data / "manifest.json")
    listed = manifest.get("signatures", {})
    if isinstance(listed, dict):
        out.signatures |= {str(s) for s in listed.get("heldout", []) or []}
    for path in sorted((data / "heldout").rglob("*.py")):
        out.ids.add(path.stem)
        if sig := declared_signature(path.read_text(encoding="utf-8", errors="replace")):
            out.signatures.add(sig)
    for meta_file in sorted((data / "heldout_solutions").glob(f"*/{META_FILE}")):
        meta = _read_json(meta_file)
        out.ids.add(meta_file.parent.name)
        if meta.get("signature"):
            out.signatures.add(str(meta["signature"]))
    for task_dir in _task_dirs(data / "infill" / "heldout"):
        task = load_task(task_dir)
        out.ids |= {task.id, task.task_id}
        if task.signature:
            out.signatures.add(task.signature)
    _, seed_test = split_tasks(load_seed_tasks())
    out.ids |= {t.id for t in seed_test}
    out.texts |= {_norm(t.reference) for t in seed_test}
    return out


def _task_dirs(folder: Path) -> Iterator[Path]:
    if folder.is_dir():
        yield from (d for d in sorted(folder.iterdir()) if d.is_dir() and not d.name.startswith("."))


def whole_items(folder: Path) -> list[RLItem]:
    """The problems of a seed-layout folder (`<id>/{reference.py, meta.json}`), sorted by id."""
    items = []
    for task_dir in _task_dirs(folder):
        ref = task_dir / "reference.py"
        if not ref.is_file():
            continue
        reference = ref.read_text(encoding="utf-8")
        meta = _read_json(task_dir / "meta.json")
        signature = str(meta.get("signature") or declared_signature(reference))
        task_id = str(meta.get("id") or task_dir.name)
        items.append(RLItem(id=task_dir.name, task_id=task_id, phase=WHOLE, kind=WHOLE, signature=signature,
                            reference=reference))
    return items


def infill_items(folder: Path) -> list[RLItem]:
    """The infill tasks of `folder` (infill_format's layout), sorted by id; none when the folder is missing."""
    if not folder.is_dir() or not any(_task_dirs(folder)):
        return []
    return [RLItem(id=t.id, task_id=t.task_id, phase=INFILL, kind=t.kind, signature=t.signature,
                   reference=t.reference, partial=t.partial) for t in load_infill(folder)]


def load_curriculum(data: Path) -> Curriculum:
    """The training items of a synthesize output folder, with every held-out item dropped (and logged)."""
    if not data.is_dir():
        raise UsageError(f"no synthesized data at {data}: make it with `kernelwright synthesize --out {data}`, or "
                         "pass --data with a folder that synthesize wrote")
    banned = held_out(data)
    curriculum = Curriculum(infill=[], whole=[])
    for items, dest in ((infill_items(data / "infill" / "train"), curriculum.infill),
                        (whole_items(data / "train"), curriculum.whole)):
        for item in items:
            why = banned.holds(item)
            if why:
                curriculum.dropped[item.id] = why
            else:
                dest.append(item)
    if curriculum.dropped:
        log.warning("%d training item(s) of %s are held out and not trained on (e.g. %s: %s)", len(curriculum.dropped),
                    data, *next(iter(curriculum.dropped.items())))
    return curriculum


def phase_order(items: list[RLItem], count: int, seed: int) -> list[RLItem]:
    """`count` items: `items` shuffled by `seed`, again after each pass; a longer count keeps the same prefix."""
    if count and not items:
        raise UsageError("no items for a phase that has steps")
    rng = random.Random(seed)
    out: list[RLItem] = []
    while len(out) < count:
        order = list(items)
        rng.shuffle(order)
        out += order[:count - len(out)]
    return out


def infill_of_kinds(curriculum: Curriculum, cfg: RLConfig) -> list[RLItem]:
    """The infill items phase 1 may draw: those of `--infill-kinds` (every one when none is named)."""
    return [it for it in curriculum.infill if not cfg.infill_kinds or it.kind in cfg.infill_kinds]


def curriculum_items(curriculum: Curriculum, cfg: RLConfig) -> list[RLItem]:
    """The items of every prompt of the run, in training order: phase 1, then phase 2."""
    per_step = cfg.prompts_per_step
    phase1, phase2 = cfg.phase1_steps, cfg.steps - cfg.phase1_steps
    infill = infill_of_kinds(curriculum, cfg)
    if phase1 and not infill:
        kinds = f" of kind {', '.join(cfg.infill_kinds)}" if cfg.infill_kinds and curriculum.infill else ""
        raise UsageError(f"no infill training tasks{kinds} in the data (infill/train/): make them with `kernelwright "
                         "synthesize --infill`, or pass --infill-steps 0")
    if phase2 and not curriculum.whole:
        raise UsageError("no whole training problems in the data (train/<id>/reference.py): pass --infill-steps "
                         "equal to --steps for an infill-only run")
    return (phase_order(pool(infill, cfg.items_per_phase, cfg.seed), phase1 * per_step, cfg.seed) +
            phase_order(pool(curriculum.whole, cfg.items_per_phase, cfg.seed + 1), phase2 * per_step, cfg.seed + 1))


def set_aside(curriculum: Curriculum, cfg: RLConfig) -> tuple[Curriculum, list[RLItem]]:
    """`cfg.eval_items` items of each phase that has steps (infill ones of the kinds asked for), drawn the same for
    every seed, and the curriculum without them nor any other item of their tasks (an infill item's task is a whole
    problem too: training on it would teach the answer)."""
    if not cfg.eval_items:
        return curriculum, []
    infill = infill_of_kinds(curriculum, cfg)
    phases = [(infill, "infill")] if cfg.phase1_steps else []
    phases += [(curriculum.whole, "whole")] if cfg.steps > cfg.phase1_steps else []
    aside: list[RLItem] = []
    for items, name in phases:
        if len(items) <= cfg.eval_items:
            raise UsageError(f"--eval-items {cfg.eval_items}: the {name} phase has {len(items)} item(s); set fewer "
                             "aside, so that some are left to train on")
        drawn = set(random.Random(f"eval:{name}").sample(range(len(items)), cfg.eval_items))
        aside += [it for i, it in enumerate(items) if i in drawn]
    tasks = {it.task_id for it in aside}
    kept = Curriculum(infill=[it for it in curriculum.infill if it.task_id not in tasks],
                      whole=[it for it in curriculum.whole if it.task_id not in tasks], dropped=curriculum.dropped)
    return kept, aside


def pool(items: list[RLItem], size: int | None, seed: int) -> list[RLItem]:
    """The phase's items the run cycles through: `size` of them drawn by `seed` (all of them for None or a
    size they do not exceed), in their order."""
    if size is None or size >= len(items):
        return items
    kept = set(random.Random(f"pool:{seed}").sample(range(len(items)), size))
    return [it for i, it in enumerate(items) if i in kept]


def rows(items: list[RLItem]) -> list[dict[str, Any]]:
    """The dataset rows the trainer reads: the chat prompt and the columns the reward needs."""
    return [{"prompt": it.messages(), "item_id": it.id, "task_id": it.task_id, "phase": it.phase, "kind": it.kind,
             "reference": it.reference, "partial": it.partial} for it in items]
