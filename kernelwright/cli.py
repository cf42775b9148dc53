"""`kernelwright`: one command over every stage.

    kernelwright pipeline | synthesize | curate | train | rl | evaluate | verify | serve | retrain | promote |
                 schedule | base-model | mlflow-server [--help]

Exit status: 0 success, 1 failure, 2 bad input, 3 no CUDA
device where one is required. Errors print one clear line, never a traceback (set
KERNELWRIGHT_DEBUG=1 to see it).
"""

from __future__ import annotations

import errno
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from rich.console import Console
from rich.markup import escape

from kernelwright import __version__
from kernelwright.config import parse_config
from kernelwright.errors import KernelwrightError, UsageError
from kernelwright.store import HasStore

if TYPE_CHECKING:
    from kernelwright.evaluation.stage import EvaluateResult

console = Console(stderr=True)
OUT_OF_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EIO)  # the machine's fault (exit 1), not the path given (exit 2)
T = TypeVar("T")


def _pipeline(argv: Sequence[str]) -> int:
    from kernelwright.job_config import PipelineConfig

    cfg = parse_config(PipelineConfig, argv, "kernelwright pipeline", "Curate, train and evaluate on the defaults.")
    from kernelwright.evaluation.report import results_table
    from kernelwright.pipeline import run_pipeline

    names = cfg.stages()
    result = run_pipeline(cfg, lambda name: console.rule(f"[bold]{names.index(name) + 1}/{len(names)} {name}"))
    ev = result.evaluation
    console.print(results_table(ev.figures, ev.gpu_verified, ev.gpu_reason))
    if result.compositions is not None:
        comp = result.compositions
        console.print("held-out compositions:")
        console.print(results_table(comp.figures, comp.gpu_verified, comp.gpu_reason))
    console.print(f"[bold green]pipeline done[/] in {result.wall_s:.0f} s: run {result.run_id}, "
                  f"{result.registered_model} version {result.version} (alias candidate)")
    console.print(closing_line(ev))
    if ev.heldout_bits_per_char is not None and result.base_heldout_bits_per_char is not None:
        console.print(f"held-out seed answers (teacher-forced): {result.base_heldout_bits_per_char:.3f} bits/char "
                      f"under the base, {ev.heldout_bits_per_char:.3f} under the trained model")
    console.print(f"tracking store: {result.tracking_uri}")
    return 0


def closing_line(ev: EvaluateResult) -> str:
    """What the evaluation did, in one line: the headline figures and the gate's decision."""
    m = ev.metrics
    figures = f"compile rate {m['compile_rate']:.2f}" if "compile_rate" in m else "no samples"
    if ev.gpu_verified:
        figures += f", fast_0 {m['fast_0']:.2f}, fast_1 {m['fast_1']:.2f}, gpu_verified true"
    else:
        figures += f", gpu_verified false ({ev.gpu_reason.split(':')[0]})"
    if ev.heldout_bits_per_char is not None:
        figures += f", held-out answers {ev.heldout_bits_per_char:.3f} bits/char"
    if ev.finish_reasons:
        ended = ev.finish_reasons
        figures += (f"; completions ended by the model {ended.get('stop', 0)}, at the token budget "
                    f"{ended.get('length', 0)}, in a loop {ended.get('loop', 0)}")
    return f"evaluation: {figures} (generate {ev.generate_s:.0f} s, check {ev.check_s:.0f} s); " \
           f"gate: {ev.gate_note}"


def _in_stage_run(name: str, cfg: HasStore, fn: Callable[[], T]) -> T:
    """Run `fn` inside an MLflow run named for the stage, in `cfg.tracking_uri` or the work folder's store."""
    from kernelwright.store import Store
    from kernelwright.tracking import stage_run, tracking_session

    with tracking_session(Store.of(cfg)), stage_run(name):
        return fn()


def _curate(argv: Sequence[str]) -> int:
    from kernelwright.curation.config import CurateConfig

    cfg = parse_config(CurateConfig, argv, "kernelwright curate", "Curate a corpus into CuSeT-weighted Parquet.")
    from kernelwright.curation.stage import check_curate_config, run_curate

    check_curate_config(cfg)  # bad arguments are refused before the MLflow store is touched
    out = _in_stage_run("curate", cfg, lambda: run_curate(cfg))
    console.print(f"[green]curated[/] -> {out}")
    return 0


def _synthesize(argv: Sequence[str]) -> int:
    from kernelwright.synthesis.config import SynthesizeConfig

    cfg = parse_config(SynthesizeConfig, argv, "kernelwright synthesize",
                       "Procedural tasks with generator-written solutions, verified on a GPU, for curation.")
    from kernelwright.synthesis.stage import check_synthesize_config, run_synthesize

    check_synthesize_config(cfg)  # bad arguments are refused before the MLflow store is touched
    r = _in_stage_run("synthesize", cfg, lambda: run_synthesize(cfg, progress=lambda m: console.print(escape(m))))
    how = "verified on this GPU (trusted batches)" if r.verified else "[yellow]unverified[/] (no GPU check)"
    rate = f", {r.verified_per_hour:,.0f} verified/hour" if r.verified_per_hour else ""
    console.print(f"[green]synthesized[/] -> {r.out}: {r.train_kept} training pairs, {r.heldout_kept} held-out "
                  f"problems, {how}; {r.tasks} tasks in {r.wall_s:.0f} s{rate}")
    console.print(f"reasons: {', '.join(f'{k} {v}' for k, v in sorted(r.reasons.items()))}")
    if r.infill:
        console.print(f"infill tasks: {r.infill.get('train', 0)} train, {r.infill.get('heldout', 0)} held out")
    return 0


def _train(argv: Sequence[str]) -> int:
    from kernelwright.training.config import TrainConfig

    cfg = parse_config(TrainConfig, argv, "kernelwright train", "CuSeT-weighted SFT with TRL.")
    from kernelwright.training.stage import train_command

    for result in train_command(cfg):
        console.print(f"[green]trained[/] -> {result.model_dir} (loss {result.train_loss:.3f}); "
                      f"registered version {result.registered_version}")
    return 0


def _rl(argv: Sequence[str]) -> int:
    from kernelwright.rl.config import RLConfig

    cfg = parse_config(RLConfig, argv, "kernelwright rl", "GRPO with the judge as the reward (TRL).")
    from kernelwright.rl.stage import rl_command

    r = rl_command(cfg)
    console.print(f"[green]rl[/] -> {r.model_dir}: {r.global_step} steps, reward {r.reward_mode}, mean reward "
                  f"{r.mean_reward:.3f}, correct {r.correct_rate:.2f}, cheat rate {r.cheat_rate:.2f}; "
                  f"registered version {r.registered_version}"
                  + (" (stopped by --max-minutes)" if r.stopped_by_time else ""))
    return 0


def _evaluate(argv: Sequence[str]) -> int:
    from kernelwright.evaluation.config import EvaluateConfig

    cfg = parse_config(EvaluateConfig, argv, "kernelwright evaluate", "Generate, verify and score kernels.")
    from kernelwright.evaluation.report import results_table
    from kernelwright.evaluation.stage import generate_candidates, plan_evaluation, run_evaluate

    plan = plan_evaluation(cfg)  # bad arguments are refused before the MLflow store is touched
    if cfg.generate_only:
        record = _in_stage_run("generate", cfg, lambda: generate_candidates(cfg, plan))
        console.print(f"[green]generated[/] {record.samples} sample(s) for each of {record.problems} problems "
                      f"in {record.generate_s:.0f} s -> {plan.generations} (check them with --generations)")
        return 0
    result = _in_stage_run("evaluate", cfg, lambda: run_evaluate(cfg, plan=plan))
    console.print(results_table(result.figures, result.gpu_verified, result.gpu_reason))
    console.print(closing_line(result))
    return 0


def _verify(argv: Sequence[str]) -> int:
    from kernelwright.verifier.config import VerifyConfig
    from kernelwright.verifier.verify import exit_code, verify_one, write_json

    cfg = parse_config(VerifyConfig, argv, "kernelwright verify", "Verify one candidate against one problem.")
    if not cfg.problem or not cfg.candidate:
        raise UsageError("verify needs --problem P.py and --candidate C.py")
    verdict = verify_one(cfg)
    if cfg.json:
        write_json(verdict, Path(cfg.json))
    colour = "green" if verdict.correct else "red"
    console.print(f"[bold {colour}]{verdict.status}[/] ({verdict.reason}) {verdict.detail}")
    for warning in verdict.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    if verdict.runtime_ms is not None:
        console.print(f"runtime {verdict.runtime_ms:.4f} ms, reference {verdict.ref_runtime_ms:.4f} ms, "
                      f"speedup {verdict.speedup:.3f}x, custom kernel share {verdict.custom_kernel_time_share}")
    if verdict.phase_s:
        phases = ", ".join(f"{k} {v:.1f}" for k, v in verdict.phase_s.items() if k != "worker_wall")
        console.print(f"build: {verdict.build or 'none'}; worker {verdict.phase_s.get('worker_wall', 0.0):.1f} s "
                      f"({phases})")
    return exit_code(verdict)


def _serve(argv: Sequence[str]) -> int:
    from kernelwright.serving.config import ServeConfig

    cfg = parse_config(ServeConfig, argv, "kernelwright serve", "Serve the registered model over HTTP.")
    from kernelwright.serve import run_serve

    return run_serve(cfg, announce=console.print)


def _base_model(argv: Sequence[str]) -> int:
    from kernelwright.base_model.config import PretrainConfig

    args = list(argv)
    if args and args[0] in ("-h", "--help"):
        args = ["pretrain", *args]
    if not args or args[0] != "pretrain":
        raise UsageError("usage: kernelwright base-model pretrain [--size tiny|small] [--minutes N] [--out DIR]")
    cfg = parse_config(PretrainConfig, args[1:], "kernelwright base-model pretrain",
                       "Pretrain a code base model on the code of the installed packages.")
    from kernelwright.base_model.pretrain import check_pretrain_config, run_pretrain

    check_pretrain_config(cfg)  # before the MLflow store is touched
    r = _in_stage_run("base-model", cfg, lambda: run_pretrain(cfg))
    what = "reused (same corpus digest and config)" if r.reused else (
        f"pretrained in {r.wall_s:.0f} s: {r.steps} steps, {r.tokens} tokens, loss {r.final_loss:.3f}, "
        f"held-out {r.heldout_bits_per_char:.3f} bits/char")
    console.print(f"[green]base model[/] -> {r.path} ({r.parameters / 1e6:.2f}M parameters) {what}; "
                  f"corpus {r.corpus_digest[:12]}, registered version {r.registered_version}")
    return 0


def _mlflow_server(argv: Sequence[str]) -> int:
    from kernelwright.mlflow_server import MlflowServerConfig, run_mlflow_server

    cfg = parse_config(MlflowServerConfig, argv, "kernelwright mlflow-server", "Serve the MLflow UI and registry.")
    run_mlflow_server(cfg, console.print)
    return 0  # not reached: the server replaced this process


def _retrain(argv: Sequence[str]) -> int:
    from kernelwright.retrain.commands import retrain_command

    return retrain_command(argv, console)


def _promote(argv: Sequence[str]) -> int:
    from kernelwright.retrain.commands import promote_command

    return promote_command(argv, console)


def _schedule(argv: Sequence[str]) -> int:
    from kernelwright.retrain.commands import schedule_command

    return schedule_command(argv, console)


COMMANDS: dict[str, tuple[Callable[[Sequence[str]], int], str]] = {
    "pipeline": (_pipeline, "curate -> train -> evaluate on the embedded defaults, tracked in MLflow"),
    "synthesize": (_synthesize, "procedural tasks with verified CUDA solutions (and held-out, infill suites)"),
    "curate": (_curate, "ingest, filter and CuSeT-score a corpus into Parquet"),
    "train": (_train, "CuSeT-weighted SFT (TRL), logged and registered in MLflow"),
    "rl": (_rl, "GRPO (TRL) with the judge as the reward: infill tasks, then whole problems"),
    "evaluate": (_evaluate, "generate for held-out problems and check the kernels"),
    "verify": (_verify, "verify one candidate against one problem (GPU; --static anywhere)"),
    "serve": (_serve, "serve the registered model over HTTP (kernel + OpenAI-compatible API)"),
    "retrain": (_retrain, "curate -> train -> evaluate -> gate, once per new set of inputs (locked, resumable)"),
    "promote": (_promote, "move the champion alias by hand (--rollback: back to previous-champion)"),
    "schedule": (_schedule, "run retrain on a cron schedule (persistent job store, no overlap)"),
    "base-model": (_base_model, "pretrain the code base model (tiny on a CPU, small on a GPU) and register it"),
    "mlflow-server": (_mlflow_server, "MLflow tracking + registry server over the work folder"),
}


def _usage() -> str:
    rows = "\n".join(f"  {name:<14} {desc}" for name, (_, desc) in COMMANDS.items())
    return (f"usage: kernelwright <command> [options]\n\ncommands:\n{rows}\n\n"
            "`kernelwright <command> --help` for options.")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=os.environ.get("KERNELWRIGHT_LOG", "WARNING"))
    if not args or args[0] in ("-h", "--help"):
        print(_usage())  # noqa: T201 (CLI output)
        return 0 if args else 2
    if args[0] == "--version":
        print(__version__)  # noqa: T201
        return 0
    if args[0] not in COMMANDS:
        console.print(f"kernelwright: unknown command {args[0]!r}\n{_usage()}")
        return 2
    try:
        return COMMANDS[args[0]][0](args[1:])
    except KernelwrightError as exc:
        if os.environ.get("KERNELWRIGHT_DEBUG"):
            raise
        console.print(f"[red]kernelwright {args[0]}: error:[/] {escape(str(exc))}", soft_wrap=True)
        return exc.exit_code
    except OSError as exc:
        if exc.filename is None or os.environ.get("KERNELWRIGHT_DEBUG"):
            raise
        # a path the command was given (or derived) that cannot be written or read: said in one line
        console.print(f"[red]kernelwright {args[0]}: error:[/] cannot use {escape(str(exc.filename))}: "
                      f"{escape(exc.strerror or str(exc))}", soft_wrap=True)
        return 1 if exc.errno in OUT_OF_SPACE else 2
    except KeyboardInterrupt:
        console.print("interrupted: checkpoints written so far are kept; run the same command to resume")
        return 130


if __name__ == "__main__":
    sys.exit(main())
