"""`kernelwright schedule`: run `kernelwright retrain` on a cron schedule, on one host.

    kernelwright schedule --cron "0 3 * * 0"                  # Sundays 03:00 UTC
    kernelwright schedule --cron "30 2 * * 1-5" --retrain-config retrain.yaml --timezone Europe/Berlin

APScheduler 3 with a persistent SQLAlchemy job store (`<workdir>/schedule.db` unless --job-store):
the job (one, with a fixed id) and its next run time survive restarts. A restart with the same
schedule keeps the stored next run time, so a time missed while the scheduler was down runs once
when it comes back (coalesced, within --misfire-grace-s); a changed schedule replaces the job.
`max_instances=1` and one worker thread: runs never overlap (and the retrain lock refuses a second
one anyway). Each run is a fresh `kernelwright retrain` process; its outcome (exit status, wall
time) is logged and written to `<workdir>/schedule/outcomes/<start>.json`. A run killed midway is
resumed by the next one (the retrain job resumes from what finished). Run one scheduler per job
store: APScheduler's job stores cannot be shared between scheduler processes.

Cron weekdays follow crontab(5): 0 and 7 are Sunday (APScheduler's own numbering starts at Monday,
so numbers are turned into day names here).
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernelwright import atomic
from kernelwright.errors import UsageError
from kernelwright.retrain.config import ScheduleConfig
from kernelwright.workdir import redacted, resolve_workdir

log = logging.getLogger(__name__)
JOB_ID = "kernelwright-retrain"
WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
MEANINGS = {0: "finished", 2: "refused: bad input", 75: "not run: another retrain holds the lock",
            124: "killed: ran past run_timeout_s"}


def _day(token: str) -> int:
    if token.isdigit() and int(token) <= 7:
        return int(token)
    if token[:3].lower() in WEEKDAYS:
        return WEEKDAYS.index(token[:3].lower())
    raise ValueError(f"{token!r} is not a weekday (0-7 or sun-sat)")


def weekday_names(field: str) -> str:
    """A crontab(5) day-of-week field as APScheduler day names: '0' -> 'sun', '1-5' -> 'mon,...,fri'."""
    if field == "*":
        return "*"
    days: set[int] = set()
    for part in field.split(","):
        span, _, step = part.partition("/")
        lo, hi = (0, 6) if span == "*" else (_day(span.split("-")[0]), _day(span.split("-")[-1]))
        if step and "-" not in span and span != "*":
            hi = 6
        if hi < lo or (step and not step.isdigit()):
            raise ValueError(f"bad day-of-week range {part!r}")
        days |= {d % 7 for d in range(lo, hi + 1, int(step or 1))}
    return ",".join(WEEKDAYS[d] for d in sorted(days))


def cron_trigger(expr: str, timezone: str) -> Any:
    """The APScheduler CronTrigger of a five-field crontab expression; UsageError when it is not one."""
    from apscheduler.triggers.cron import CronTrigger

    fields = expr.split()
    if len(fields) != 5:
        raise UsageError(f"--cron {expr!r}: need five fields (minute hour day month weekday), got {len(fields)}")
    try:
        return CronTrigger(minute=fields[0], hour=fields[1], day=fields[2], month=fields[3],
                           day_of_week=weekday_names(fields[4]), timezone=timezone)
    except Exception as exc:  # noqa: BLE001 (APScheduler raises ValueError, zoneinfo KeyError subclasses)
        raise UsageError(f"--cron {expr!r} --timezone {timezone!r}: {exc}") from None


def run_retrain_job(argv: list[str], timeout_s: int, outcomes: str) -> int:
    """One scheduled run: `argv` (a `kernelwright retrain` command) in a fresh process; outcome logged."""
    started = datetime.now(UTC)
    t0 = time.monotonic()
    try:
        rc = subprocess.run(argv, timeout=timeout_s or None, check=False).returncode
    except subprocess.TimeoutExpired:
        rc = 124
    wall = time.monotonic() - t0
    meaning = MEANINGS.get(rc, "failed")
    atomic.write_json(Path(outcomes) / f"{started:%Y%m%dT%H%M%S%fZ}.json",
                      {"started": started.isoformat(), "exit_status": rc, "outcome": meaning, "wall_s": wall,
                       "argv": [redacted(a) for a in argv]})
    (log.info if rc in (0, 75) else log.error)("scheduled retrain %s (exit status %d) after %.0f s", meaning, rc, wall)
    return rc


def retrain_argv(cfg: ScheduleConfig) -> list[str]:
    argv = [sys.executable, "-m", "kernelwright.cli", "retrain"]
    if cfg.retrain_config:
        argv += ["--config", str(Path(cfg.retrain_config).resolve())]
    if cfg.workdir:
        argv += ["--workdir", str(resolve_workdir(cfg.workdir))]
    if cfg.tracking_uri:
        argv += ["--tracking-uri", cfg.tracking_uri]
    return argv


def job_store_uri(cfg: ScheduleConfig, workdir: Path) -> str:
    return cfg.job_store or f"sqlite:///{workdir / 'schedule.db'}"


def build_scheduler(cfg: ScheduleConfig, workdir: Path) -> Any:
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler

    class Scheduler(BackgroundScheduler):
        """APScheduler 3's thread looks for due jobs once more after shutdown, and a round already past its
        state check goes on while shutdown stops the executor; a due job then fails to reach the stopped
        executor and its run time is spent. Here shutdown waits for a round in flight, and no round starts
        once it has begun: a stopping scheduler leaves the store alone."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self._round = threading.Lock()
            self._stopping = False

        def start(self, *args: Any, **kwargs: Any) -> None:
            self._stopping = False
            super().start(*args, **kwargs)

        def shutdown(self, wait: bool = True) -> None:
            with self._round:  # a round in flight ends first, with its executor still up
                self._stopping = True
            super().shutdown(wait)

        def _process_jobs(self) -> float | None:
            with self._round:  # shutdown sets _stopping before the state, so this covers the stopped state too
                return None if self._stopping else super()._process_jobs()

    return Scheduler(
        jobstores={"default": SQLAlchemyJobStore(url=job_store_uri(cfg, workdir))},
        executors={"default": ThreadPoolExecutor(1)},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": cfg.misfire_grace_s},
        timezone=cfg.timezone)


def install_job(scheduler: Any, cfg: ScheduleConfig, argv: Sequence[str], outcomes: Path) -> Any:
    """Put the retrain job in the (started, paused) scheduler's store, keeping a stored job with the same
    schedule and command as it is (its next run time, possibly in the past, included)."""
    trigger = cron_trigger(cfg.cron, cfg.timezone)
    args = [list(argv), cfg.run_timeout_s, str(outcomes)]
    job = scheduler.get_job(JOB_ID)
    if (job is not None and repr(job.trigger) == repr(trigger) and list(job.args) == args
            and job.misfire_grace_time == cfg.misfire_grace_s):
        log.info("kept the stored job: next run %s", job.next_run_time)
        return job
    return scheduler.add_job(run_retrain_job, trigger, args=args, id=JOB_ID, name="kernelwright retrain",
                             replace_existing=True, coalesce=True, max_instances=1,
                             misfire_grace_time=cfg.misfire_grace_s)


def _log_event(event: Any) -> None:
    from apscheduler.events import EVENT_JOB_MISSED

    what = ("missed its run time (past the misfire grace)" if event.code == EVENT_JOB_MISSED
            else "skipped: the previous run is still going")
    log.warning("scheduler: job %s %s", event.job_id, what)


def start_scheduler(cfg: ScheduleConfig, argv: Sequence[str] | None = None) -> tuple[Any, Any]:
    """A running scheduler with the retrain job installed; (scheduler, job)."""
    from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED

    cron_trigger(cfg.cron, cfg.timezone)  # a bad expression is refused before the job store is touched
    if cfg.retrain_config and not Path(cfg.retrain_config).is_file():
        raise UsageError(f"--retrain-config: file not found: {cfg.retrain_config}")
    workdir = resolve_workdir(cfg.workdir)
    scheduler = build_scheduler(cfg, workdir)
    scheduler.add_listener(_log_event, EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES)
    scheduler.start(paused=True)
    install_job(scheduler, cfg, argv or retrain_argv(cfg), workdir / "schedule" / "outcomes")
    scheduler.resume()
    return scheduler, scheduler.get_job(JOB_ID)


def run_schedule(cfg: ScheduleConfig, announce: Callable[[str], object] = log.info) -> int:
    """Schedule and wait until SIGINT or SIGTERM; a run in progress is left to finish or be killed with us."""
    logging.getLogger(__name__).setLevel(logging.INFO)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    scheduler, job = start_scheduler(cfg)
    announce(f"retrain scheduled at '{cfg.cron}' ({cfg.timezone}); next run {job.next_run_time if job else 'now'}; "
             f"job store {job_store_uri(cfg, resolve_workdir(cfg.workdir))}")
    while not stop.wait(3600):
        pass
    scheduler.shutdown(wait=False)
    announce("scheduler stopped")
    return 0
