"""The command lines of `kernelwright retrain`, `kernelwright promote` and `kernelwright schedule`."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console

from kernelwright.config import parse_config
from kernelwright.retrain.config import PromoteConfig, RetrainConfig, ScheduleConfig


def retrain_command(argv: Sequence[str], console: Console) -> int:
    from kernelwright.retrain.job import run_retrain

    cfg = parse_config(RetrainConfig, argv, "kernelwright retrain",
                       "Curate, train, evaluate and gate, once per new set of inputs (locked, resumable).")
    result = run_retrain(cfg, on_stage=lambda name: console.rule(f"[bold]retrain: {name}"))
    version = f"candidate v{result.candidate_version}" if result.candidate_version else "no candidate"
    console.print(f"[bold]retrain {result.decision}[/]: {result.reason}")
    champion = f"champion v{result.champion_version}" if result.champion_version else "no champion"
    console.print(f"{version}; {champion}; run {result.run_id} "
                  f"(watermark {result.watermark}) in {result.wall_s:.0f} s")
    return 0


def promote_command(argv: Sequence[str], console: Console) -> int:
    from kernelwright.evaluation.registry import promote, rollback
    from kernelwright.store import Store
    from kernelwright.tracking import tracking_session

    cfg = parse_config(PromoteConfig, argv, "kernelwright promote", "Move the champion alias by hand.")
    with tracking_session(Store.of(cfg)):
        if cfg.rollback:
            restored, demoted = rollback(cfg.registered_model)
            console.print(f"champion is v{restored} again (was v{demoted}); previous-champion cleared")
        else:
            assert cfg.version is not None
            _check_version(cfg.registered_model, cfg.version)
            previous = promote(cfg.registered_model, cfg.version, "promoted by hand")
            console.print(f"champion is v{cfg.version} (previous-champion v{previous})")
    return 0


def _check_version(name: str, version: str) -> None:
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from kernelwright.errors import UsageError

    try:
        MlflowClient().get_model_version(name, version)
    except MlflowException:
        raise UsageError(f"{name} has no version {version}") from None


def schedule_command(argv: Sequence[str], console: Console) -> int:
    from kernelwright.retrain.schedule import run_schedule

    cfg = parse_config(ScheduleConfig, argv, "kernelwright schedule",
                       "Run `kernelwright retrain` on a cron schedule (persistent, never overlapping).")
    return run_schedule(cfg, announce=console.print)
