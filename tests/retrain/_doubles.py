"""Doubles for the retrain tests: a corpus, a two-problem suite, a generator and a GPU verifier."""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from kernelwright.evaluation import stage
from kernelwright.retrain.config import RetrainConfig
from kernelwright.seed import load_seed_tasks
from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.verdict import Verdict

FIXTURES = Path(__file__).parent.parent / "fixtures" / "verify"
HONEST = FIXTURES / "candidates" / "honest_affine.py"


def corpus(root: Path, tasks: int) -> Path:
    """A seed-layout corpus of the first `tasks` seed tasks (more tasks: new data)."""
    for task in load_seed_tasks()[:tasks]:
        if not (root / task.path.name).is_dir():
            shutil.copytree(task.path, root / task.path.name)
    return root


def suite(root: Path) -> Path:
    level = root / "level1"
    level.mkdir(parents=True, exist_ok=True)
    for name in ("affine.py", "relu_nonneg.py"):
        shutil.copy(FIXTURES / "problems" / name, level / name)
    return root


class FakeGpu:
    """Every candidate is correct; its speedup on a problem is `speeds[version][problem]` (default 1.5),
    the version read from the evaluation folder (`.../v<N>/generations/...`)."""

    def __init__(self) -> None:
        self.speeds: dict[str, dict[str, float]] = {}
        self.evaluated: list[str] = []
        self.generation_configs: list[stage.EvaluateConfig] = []  # one per evaluation, as generation got it

    def __call__(self, cfgs: Sequence[VerifyConfig], jobs: int) -> list[Verdict]:
        out = []
        for c in cfgs:
            version = re.search(r"/v(\d+)/generations/", str(c.candidate)).group(1)  # type: ignore[union-attr]
            self.evaluated.append(version)
            speed = self.speeds.get(version, {}).get(Path(c.candidate).parent.name, 1.5)
            out.append(Verdict.of("ok", compile_s=1.0, runtime_ms=1.0, ref_runtime_ms=speed, speedup=speed,
                                  custom_kernel_time_share=1.0))
        return out


def honest_generations(folder: Path, problems: list, ref: object,
                       cfg: stage.EvaluateConfig) -> stage.GenerationRecord:
    """`generate_into`'s stand-in: the honest candidate for every sample, and its record."""
    for problem in problems:
        for k in range(cfg.samples):
            (folder / problem.id).mkdir(parents=True, exist_ok=True)
            shutil.copy(HONEST, folder / problem.id / f"sample_{k}.py")
    return stage.GenerationRecord(str(getattr(ref, "uri", ref)), cfg.samples, cfg.temperature, cfg.max_new_tokens,
                                  cfg.seed, len(problems), 0.0)


def on_a_fake_gpu(monkeypatch: pytest.MonkeyPatch) -> FakeGpu:
    monkeypatch.setattr(stage, "cuda_available", lambda: True)
    gpu = FakeGpu()

    def generate(folder: Path, problems: list, ref: object, cfg: stage.EvaluateConfig) -> stage.GenerationRecord:
        gpu.generation_configs.append(cfg)
        return honest_generations(folder, problems, ref, cfg)

    monkeypatch.setattr(stage, "generate_into", generate)
    return gpu


def tiny_retrain(tmp: Path, model: Path, tasks: int = 4, **kw: object) -> RetrainConfig:
    return RetrainConfig(**{"workdir": str(tmp / "kw"), "input": [str(corpus(tmp / "corpus", tasks))],
                            "nvrtc": False, "base_model": str(model), "max_steps": 2, "max_length": 512,
                            "suite": str(suite(tmp / "suite")), "max_new_tokens": 8, **kw})  # type: ignore[arg-type]
