"""The evaluate stage: candidates from a folder, CPU-level checks, figures, and the champion gate."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from kernelwright.evaluation import stage
from kernelwright.evaluation.candidates import candidates_from, select_problems
from kernelwright.evaluation.config import EvaluateConfig
from kernelwright.evaluation.metrics import metric_key
from kernelwright.evaluation.stage import run_evaluate
from kernelwright.tracking import setup_tracking
from kernelwright.verifier.config import VerifyConfig
from kernelwright.verifier.verdict import JUDGE_VERSION, Verdict
from tests.evaluation._rows import FakeRow

FIXTURES = Path(__file__).parent.parent / "fixtures" / "verify"


@pytest.fixture()
def suite(tmp_path: Path) -> Path:
    """A KernelBench level folder with the two fixture problems."""
    root = tmp_path / "suite" / "level1"
    root.mkdir(parents=True)
    for name in ("affine.py", "relu_nonneg.py"):
        shutil.copy(FIXTURES / "problems" / name, root / name)
    return tmp_path / "suite"


@pytest.fixture()
def generations(tmp_path: Path) -> Path:
    """affine: an honest sample and a try/except fallback; relu_nonneg: sample 0 only."""
    gen = tmp_path / "gen"
    (gen / "level1" / "affine").mkdir(parents=True)
    shutil.copy(FIXTURES / "candidates" / "honest_affine.py", gen / "level1" / "affine" / "sample_0.py")
    shutil.copy(FIXTURES / "candidates" / "fallback_try_except.py", gen / "level1" / "affine" / "sample_1.py")
    (gen / "level1" / "relu_nonneg").mkdir()
    shutil.copy(FIXTURES / "candidates" / "identity_for_relu.py", gen / "level1" / "relu_nonneg" / "sample_0.py")
    return gen


def test_candidates_layout_and_missing_samples(suite: Path, generations: Path) -> None:
    problems = select_problems(str(suite), "test")
    assert [p.id for p in problems] == ["level1/affine", "level1/relu_nonneg"]
    cands = candidates_from(generations, problems, samples=2)
    assert [(c.problem.id, c.sample, c.path is not None) for c in cands] == [
        ("level1/affine", 0, True), ("level1/affine", 1, True),
        ("level1/relu_nonneg", 0, True), ("level1/relu_nonneg", 1, False)]


def test_builtin_suite_and_seed_split_load() -> None:
    assert len(select_problems("builtin", "test")) >= 40
    held_out = select_problems(None, "test")
    assert held_out and all(p.path.name == "reference.py" for p in held_out)


def test_cpu_evaluation_reports_no_speed_figures(suite: Path, generations: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stage, "cuda_available", lambda: False)
    result = run_evaluate(EvaluateConfig(suite=str(suite), generations=str(generations), samples=2,
                                         out=str(tmp_path / "out"), workdir=str(tmp_path / "kw")))
    reasons = [(r.problem_id, r.sample, r.verdict.reason) for r in result.rows]
    assert reasons == [("level1/affine", 0, "no_gpu"), ("level1/affine", 1, "fallback_try_except"),
                       ("level1/relu_nonneg", 0, "no_gpu"), ("level1/relu_nonneg", 1, "no_candidate")]
    m = result.metrics
    assert m["samples"] == 4 and m["gpu_verified_rate"] == 0.0
    assert m["compile_rate"] == 0.75  # the fallback's device code compiles; the missing file does not
    assert m["cheat_rate"] == 0.25
    assert "fast_0" not in m and "fast_1" not in m  # not measured, so not reported
    assert m[metric_key("samples", "elementwise")] == 2 and m[metric_key("samples", "level1")] == 2  # CATEGORY
    assert m[metric_key("cheat_rate", "elementwise")] == 0.5
    assert result.figures.overall.not_applicable["fast_0"] == stage.NO_GPU_REASON
    assert result.gate is None and "not GPU-verified" not in result.gate_note  # a path: no registered version
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["gpu_verified"] is False and len(saved["samples"]) == 4
    assert saved["seconds"] == {"generate_s": result.generate_s, "check_s": result.check_s}
    assert min(result.generate_s, result.check_s) >= 0.0
    assert (tmp_path / "out" / "per_category.png").is_file()


def _register(client: MlflowClient, name: str, source: Path) -> str:
    try:
        client.create_registered_model(name)
    except mlflow.exceptions.MlflowException:
        pass
    return str(client.create_model_version(name, str(source)).version)


def _honest_generations(gen: Path) -> Path:
    """The honest affine candidate as sample 0 of both fixture problems."""
    for pid in ("affine", "relu_nonneg"):
        (gen / "level1" / pid).mkdir(parents=True)
        shutil.copy(FIXTURES / "candidates" / "honest_affine.py", gen / "level1" / pid / "sample_0.py")
    return gen


def _fake_gpu(speedups: dict[str, float], share: float = 1.0):
    """A verifier double: every candidate is correct with the speedup its folder name maps to, its own
    kernels taking `share` of the device time."""
    def verify(cfgs: Sequence[VerifyConfig], jobs: int) -> list[Verdict]:
        return [Verdict.of("ok", compile_s=1.0, runtime_ms=1.0, ref_runtime_ms=speedups[Path(c.candidate).parent.name],
                           speedup=speedups[Path(c.candidate).parent.name], custom_kernel_time_share=share)
                for c in cfgs]
    return verify


def test_gate_moves_champion_only_on_improvement(suite: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    workdir = tmp_path / "kw"
    setup_tracking(workdir)
    client = MlflowClient()
    gen = _honest_generations(tmp_path / "gen1")
    monkeypatch.setattr(stage, "cuda_available", lambda: True)
    name = "kw-test-coder"
    versions = [_register(client, name, tmp_path) for _ in range(3)]

    def run(version: str, speeds: dict[str, float]) -> stage.EvaluateResult:
        cfg = EvaluateConfig(suite=str(suite), generations=str(gen), model=f"models:/{name}/{version}",
                             out=str(tmp_path / f"out{version}"), workdir=str(workdir))
        return run_evaluate(cfg, verifier=_fake_gpu(speeds))

    first = run(versions[0], {"affine": 1.5, "relu_nonneg": 0.8})
    assert first.metrics["fast_1"] == 0.5 and first.gate is not None and first.gate.promote
    assert first.metrics["compile_rate"] == 1.0
    assert str(client.get_model_version_by_alias(name, "champion").version) == versions[0]
    worse = run(versions[1], {"affine": 0.9, "relu_nonneg": 0.8})
    assert worse.gate is not None and not worse.gate.promote and worse.gate.reason == "fast_1 did not improve"
    assert str(client.get_model_version_by_alias(name, "champion").version) == versions[0]
    better = run(versions[2], {"affine": 2.0, "relu_nonneg": 1.2})
    assert better.gate is not None and better.gate.promote
    assert str(client.get_model_version_by_alias(name, "champion").version) == versions[2]
    tags = client.get_model_version(name, versions[2]).tags
    assert float(tags["kw.eval.fast_1"]) == 1.0 and tags["kw.eval.suite"] == stage.suite_id(
        select_problems(str(suite), "test"), 1)
    rerun = run(versions[1], {"affine": 9.0, "relu_nonneg": 9.0})
    assert rerun.gate is not None and not rerun.gate.promote  # fast_1 ties at 1.0: no improvement


def test_real_workers_wired_through_evaluate(suite: Path, generations: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU path end to end with the real workers (verify.run_workers): on this CPU machine every worker fails
    before its build, and each row says so (runtime error, not built) instead of crashing."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("on a GPU the fixtures' own GPU test covers this path")
    monkeypatch.setattr(stage, "cuda_available", lambda: True)
    result = run_evaluate(EvaluateConfig(suite=str(suite), generations=str(generations), samples=2, jobs=2,
                                         timeout_s=120, out=str(tmp_path / "out"), workdir=str(tmp_path / "kw")))
    by_reason = {(r.problem_id, r.sample): (r.verdict.status, r.verdict.reason, r.gpu_verified, r.compiled)
                 for r in result.rows}
    assert by_reason[("level1/affine", 1)] == ("rejected", "fallback_try_except", False, True)
    assert by_reason[("level1/relu_nonneg", 1)] == ("compile_error", "no_candidate", False, False)
    for key in (("level1/affine", 0), ("level1/relu_nonneg", 0)):
        status, reason, verified, compiled = by_reason[key]
        assert (status, verified, compiled) == ("runtime_error", True, False), by_reason[key]
    assert result.metrics["fast_0"] == 0.0 and result.metrics["compile_rate"] == 0.25
    ran = [r.verdict for r in result.rows if r.gpu_verified]
    assert ran and all(v.judge_version == JUDGE_VERSION and v.seeds == [0, 1] for v in ran)


def _failing_generations(tmp_path: Path) -> Path:
    """Both fixture problems answered by code that never reaches a GPU: bad Python and no kernel."""
    gen = tmp_path / "gen_bad"
    (gen / "level1" / "affine").mkdir(parents=True)
    (gen / "level1" / "affine" / "sample_0.py").write_text("def broken(:\n")
    (gen / "level1" / "relu_nonneg").mkdir()
    (gen / "level1" / "relu_nonneg" / "sample_0.py").write_text("import torch\nclass ModelNew(torch.nn.Module):\n"
                                                               "    def forward(self, x):\n        return x\n")
    return gen


def test_a_gpu_run_whose_candidates_all_fail_is_recorded_and_never_promoted(
        suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workdir = tmp_path / "kw"
    setup_tracking(workdir)
    client = MlflowClient()
    version = _register(client, "kw-fail-coder", tmp_path)
    monkeypatch.setattr(stage, "cuda_available", lambda: True)
    with mlflow.start_run():
        result = run_evaluate(EvaluateConfig(suite=str(suite), generations=str(_failing_generations(tmp_path)),
                                             model=f"models:/kw-fail-coder/{version}", out=str(tmp_path / "out"),
                                             workdir=str(workdir)), verifier=_fake_gpu({}))
    m = result.metrics
    assert result.gpu_verified and m["compile_rate"] == 0.0 and m["fast_0"] == 0.0 and m["fast_1"] == 0.0
    assert m["fast_p.0.5"] == 0.0 and "geomean_speedup" not in m
    assert result.figures.overall.not_applicable["geomean_speedup"] == "no correct sample"
    assert result.gate is not None and not result.gate.promote and "fast_0 is 0" in result.gate.reason
    with pytest.raises(mlflow.exceptions.MlflowException):
        client.get_model_version_by_alias("kw-fail-coder", "champion")
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["not_applicable"]["geomean_speedup"] == "no correct sample"
    assert float(client.get_model_version("kw-fail-coder", version).tags["kw.eval.fast_0"]) == 0.0


def _rendered(table: object, width: int = 80) -> str:
    from rich.console import Console

    console = Console(width=width, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(table)
    return console.export_text()


def test_the_console_table_fits_80_columns_and_shows_a_dash_where_a_figure_does_not_apply() -> None:
    from kernelwright.evaluation.metrics import suite_figures
    from kernelwright.evaluation.report import GPU_COLUMNS, results_table

    cats = ["convolution", "elementwise", "normalization", "quantization", "reduction", "softmax"]
    rows = [FakeRow(c, Verdict.of("ok", speedup=1.5) if i % 2 else Verdict.of("wrong_output"))
            for i, c in enumerate(cats * 2)]
    text = _rendered(results_table(suite_figures(rows, gpu=True), gpu=True))
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in text and "nan" not in text
    header = next(line for line in lines if line.lstrip().startswith("group"))
    assert header.split() == ["group", *[h for _, h, _ in GPU_COLUMNS]]
    body = [line.split() for line in lines if line.split() and line.split()[0] in ("all", *cats)]
    assert [b[0] for b in body] == ["all", *sorted(cats)]  # one row per category, nothing else
    conv = dict(zip(["group", *[f for f, _, _ in GPU_COLUMNS]], body[1], strict=True))
    assert conv["fast_0"] == "0.00" and conv["geomean_speedup"] == "-"  # convolution: never correct


def test_evaluate_refuses_a_missing_suite_before_touching_the_store(tmp_path: Path) -> None:
    from kernelwright.cli import main

    workdir = tmp_path / "kw"
    assert main(["evaluate", "--suite", str(tmp_path / "nonexistent"), "--workdir", str(workdir)]) == 2
    assert not (workdir / "mlflow.db").exists()
    assert main(["evaluate", "--model", str(tmp_path / "no-model"), "--workdir", str(workdir)]) == 2
    assert not (workdir / "mlflow.db").exists()


def test_a_cpu_evaluation_carries_the_host_code_pytorch_warning(suite: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stage, "cuda_available", lambda: False)
    gen = tmp_path / "gen_torch"
    (gen / "level1" / "affine").mkdir(parents=True)
    honest = (FIXTURES / "candidates" / "honest_affine.py").read_text()
    partial = honest.replace("    return y;\n", "    return at::matmul(y, y.t());\n")
    assert partial != honest
    (gen / "level1" / "affine" / "sample_0.py").write_text(partial)
    result = run_evaluate(EvaluateConfig(suite=str(suite), generations=str(gen), out=str(tmp_path / "out"),
                                         workdir=str(tmp_path / "kw")))
    row = next(r for r in result.rows if r.problem_id == "level1/affine")
    assert row.verdict.reason == "no_gpu" and any("at::matmul" in w for w in row.verdict.warnings)


def test_the_gate_compares_own_kernel_figures_unless_told_otherwise(suite: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    workdir = tmp_path / "kw"
    setup_tracking(workdir)
    client = MlflowClient()
    gen = _honest_generations(tmp_path / "gen_views")
    monkeypatch.setattr(stage, "cuda_available", lambda: True)
    name = "kw-view-coder"
    versions = [_register(client, name, tmp_path) for _ in range(3)]

    def run(version: str, speed: float, share: float, view: str = "own") -> stage.EvaluateResult:
        cfg = EvaluateConfig(suite=str(suite), generations=str(gen), model=f"models:/{name}/{version}",
                             out=str(tmp_path / f"o{version}"), workdir=str(workdir), gate_view=view)
        return run_evaluate(cfg, verifier=_fake_gpu({"affine": speed, "relu_nonneg": speed}, share))

    first = run(versions[0], 1.5, 0.95)
    assert first.gate is not None and first.gate.promote
    assert first.metrics["own.fast_1"] == 1.0 and first.metrics["mean_custom_kernel_time_share"] == 0.95
    partial = run(versions[1], 3.0, 0.5)  # faster, but half its device time is PyTorch's
    assert partial.metrics["fast_1"] == 1.0 and partial.metrics["own.fast_1"] == 0.0
    assert partial.metrics["own.fast_0"] == 0.0 and "own.geomean_speedup" not in partial.metrics
    assert partial.gate is not None and not partial.gate.promote and partial.gate.reason.startswith("fast_0 is 0")
    tags = client.get_model_version(name, versions[1]).tags
    assert float(tags["kw.eval.fast_1"]) == 1.0 and float(tags["kw.eval.own.fast_1"]) == 0.0
    assert tags["kw.eval.judge_version"] == JUDGE_VERSION
    client.set_model_version_tag(name, versions[0], "kw.eval.judge_version", "0")  # an older judge's figures
    other_judge = run(versions[2], 9.0, 1.0)
    assert other_judge.gate is not None and not other_judge.gate.promote
    assert "judge version" in other_judge.gate.reason
    assert tags["kw.eval.sampling"] == "external"  # candidate files from elsewhere: sampling unknown
    client.set_model_version_tag(name, versions[0], "kw.eval.judge_version", JUDGE_VERSION)
    client.set_model_version_tag(name, versions[0], "kw.eval.sampling", "temperature=0.8,max_new_tokens=1024")
    other_sampling = run(versions[2], 9.0, 1.0)  # figures of candidates sampled another way are not compared
    assert other_sampling.gate is not None and not other_sampling.gate.promote
    assert "sampled with external" in other_sampling.gate.reason
    client.set_model_version_tag(name, versions[0], "kw.eval.sampling", "external")
    same_scope = run(versions[2], 9.0, 1.0)  # compared again: the same figures as the champion's
    assert same_scope.gate is not None and same_scope.gate.champion is not None
    assert same_scope.gate.reason == "fast_1 did not improve"
    (gen / "generation.json").write_text(json.dumps({"temperature": 0.8, "max_new_tokens": 1024}))
    recorded = run(versions[2], 9.0, 1.0)  # a folder that records its sampling keeps that scope
    assert client.get_model_version(name, versions[2]).tags["kw.eval.sampling"] == \
        "temperature=0.8,max_new_tokens=1024"
    assert recorded.gate is not None and "sampled with temperature=0.8" in recorded.gate.reason


def test_the_kernelbench_view_gate_counts_partial_pytorch(suite: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    setup_tracking(tmp_path / "kw")
    client = MlflowClient()
    gen = _honest_generations(tmp_path / "gen_any")
    monkeypatch.setattr(stage, "cuda_available", lambda: True)
    version = _register(client, "kw-any-coder", tmp_path)
    result = run_evaluate(EvaluateConfig(suite=str(suite), generations=str(gen),
                                         model=f"models:/kw-any-coder/{version}", out=str(tmp_path / "o"),
                                         workdir=str(tmp_path / "kw"), gate_view="any"),
                          verifier=_fake_gpu({"affine": 2.0, "relu_nonneg": 2.0}, share=0.3))
    assert result.gate is not None and result.gate.promote and result.gate.candidate["fast_1"] == 1.0
