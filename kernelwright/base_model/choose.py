"""Which base model a stage starts from: the user's checkpoint folder, or the pretrained default.

    kernelwright pipeline --base-model /models/Qwen2.5-Coder-1.5B   # a user's folder, checked first
    kernelwright pipeline                                          # the tiny base, built on first use
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from kernelwright.base_model.pretrain import ensure_default_base
from kernelwright.errors import UsageError


def check_base_model(base_model: str | None) -> None:
    """A user's `--base-model` must be a local HF checkpoint folder; checked before any work starts."""
    if base_model and not (Path(base_model) / "config.json").is_file():
        raise UsageError(f"--base-model {base_model}: no Hugging Face checkpoint there (no config.json); "
                         "pass a local model folder, or leave it out for the tiny default model")


def resolve_base_model(base_model: str | None, workdir: Path, max_steps: int = 0) -> Path:
    """The user's checkpoint folder, or the pretrained tiny base in `<workdir>/base-model`
    (`kernelwright.base_model`: pretrained on first use, reused while its corpus digest and config match;
    `max_steps` steps exactly, 0: as many as its minutes allow)."""
    if base_model:
        return Path(base_model)
    return ensure_default_base(workdir, max_steps)


J = TypeVar("J", bound=Any)


def with_pinned_base(job: J, workdir: Path) -> J:
    """A job's config (`base_model`, `base_max_steps`) with its default base of `base_max_steps` steps found or
    pretrained now and named as its `base_model`, so that every stage it runs takes that folder; unchanged when
    it names no step count."""
    if not job.base_max_steps:
        return job
    return replace(job, base_model=str(resolve_base_model(None, workdir, job.base_max_steps)), base_max_steps=0)
