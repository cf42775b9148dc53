"""The kind of model the pipeline makes, for the serving tests: the base-model code's micro preset (LFM2's
shape, short-convolution layers below attention), pretrained in seconds on a few standard-library
modules, and registered in an MLflow store as `kernelwright-coder` with alias `candidate`, as the
pipeline's train stage registers its model."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path

import pytest

STDLIB = Path(sysconfig.get_paths()["stdlib"])
SOURCES = ("textwrap.py", "colorsys.py", "bisect.py", "heapq.py", "fnmatch.py", "shlex.py")
STEPS = 40  # enough for next-token scores far from uniform (a padding leak shows in them), seconds on one core
_BUILT: dict[str, Path] = {}


def micro_base(factory: pytest.TempPathFactory) -> Path:
    """The micro base model, built once per test session."""
    if "micro" not in _BUILT:
        from kernelwright.base_model.pretrain import PretrainConfig, run_pretrain

        root = factory.mktemp("micro-base")
        code = root / "code"
        code.mkdir()
        for name in SOURCES:
            shutil.copy(STDLIB / name, code / name)
        cfg = PretrainConfig(size="micro", source=[str(code)], out=str(root / "base"), workdir=str(root / "wd"),
                             max_steps=STEPS, warmup_steps=4, register=False)
        _BUILT["micro"] = run_pretrain(cfg).path
    return _BUILT["micro"]


def register_candidate(model_dir: Path, workdir: Path) -> str:
    """Log `model_dir` to `workdir`'s MLflow store and register it as kernelwright-coder @candidate; the store's URI."""
    import mlflow

    from kernelwright.models import load_base_model, load_tokenizer
    from kernelwright.tracking import REGISTERED_MODEL, set_alias, setup_tracking
    from kernelwright.workdir import tracking_uri

    setup_tracking(workdir)
    model, tokenizer = load_base_model(model_dir, device="cpu"), load_tokenizer(model_dir)
    with mlflow.start_run(run_name="train"):
        info = mlflow.transformers.log_model(  # type: ignore[attr-defined]
            transformers_model={"model": model, "tokenizer": tokenizer}, name="model", task="text-generation",
            registered_model_name=REGISTERED_MODEL, pip_requirements=["kernelwright", "torch", "transformers"])
    set_alias(str(info.registered_model_version), "candidate", REGISTERED_MODEL)
    return tracking_uri(workdir)
