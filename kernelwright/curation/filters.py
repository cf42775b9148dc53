"""Corpus filters, each counted with the ids it removed (report.json and an MLflow table)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from kernelwright.evaluation.static_checks import check_source
from kernelwright.prompting import extract_code


class HasCompletion(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def completion(self) -> str: ...


S = TypeVar("S", bound=HasCompletion)


@dataclass
class FilterReport:
    input_rows: int = 0
    removed: dict[str, list[str]] = field(default_factory=dict)

    def remove(self, reason: str, ids: Sequence[str]) -> None:
        self.removed.setdefault(reason, []).extend(ids)

    @property
    def kept(self) -> int:
        return self.input_rows - sum(len(v) for v in self.removed.values())

    def as_dict(self) -> dict:
        return {
            "input_rows": self.input_rows,
            "kept": self.kept,
            "removed": {k: {"count": len(v), "ids": v} for k, v in self.removed.items()},
        }

    def table(self) -> dict[str, list]:
        reasons = sorted(self.removed)
        return {"filter": reasons, "removed": [len(self.removed[r]) for r in reasons],
                "example_ids": [", ".join(self.removed[r][:5]) for r in reasons]}


def run_filters(samples: Sequence[S], key: Callable[[S], str]) -> tuple[list[S], FilterReport]:
    """Exact-duplicate removal (by `key`), then the static kernel and fallback checks."""
    report = FilterReport(input_rows=len(samples))
    seen: set[str] = set()
    kept: list[S] = []
    for s in samples:
        k = key(s)
        if k in seen:
            report.remove("exact_duplicate", [s.id])
            continue
        seen.add(k)
        static = check_source(extract_code(s.completion))
        if not static.ok:
            report.remove(static.reasons[0], [s.id])
            continue
        kept.append(s)
    for reason in ("exact_duplicate", "no_kernel", "fallback_try_except", "fallback_torch_op", "syntax_error"):
        report.removed.setdefault(reason, [])
    return kept, report
