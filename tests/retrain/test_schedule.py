"""`kernelwright schedule`: crontab weekdays, a persistent job that survives restarts, missed runs coalesced."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.errors import UsageError
from kernelwright.retrain.config import ScheduleConfig
from kernelwright.retrain.schedule import JOB_ID, cron_trigger, start_scheduler, weekday_names


def test_crontab_weekdays_are_sunday_based() -> None:
    assert weekday_names("0") == weekday_names("7") == "sun"
    assert weekday_names("1-5") == "mon,tue,wed,thu,fri"
    assert weekday_names("*/2") == "sun,tue,thu,sat" and weekday_names("5-7") == "sun,fri,sat"
    nxt = cron_trigger("0 3 * * 0", "UTC").get_next_fire_time(None, datetime(2026, 12, 1, tzinfo=UTC))
    assert nxt == datetime(2026, 12, 6, 3, 0, tzinfo=UTC) and nxt.strftime("%A") == "Sunday"
    for bad in ("0 3 * *", "0 3 * * 8", "0 25 * * *", "0 3 * * 5-2"):
        with pytest.raises(UsageError, match="--cron"):
            cron_trigger(bad, "UTC")
    with pytest.raises(UsageError):
        cron_trigger("0 3 * * 0", "Mars/Olympus")


def test_bad_arguments_are_refused_before_the_job_store_is_touched(tmp_path: Path) -> None:
    assert main(["schedule", "--cron", "every sunday", "--workdir", str(tmp_path)]) == 2
    assert main(["schedule", "--retrain-config", str(tmp_path / "none.yaml"), "--workdir", str(tmp_path)]) == 2
    assert not (tmp_path / "schedule.db").exists()


def _outcomes(workdir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((workdir / "schedule" / "outcomes").glob("*.json"))]


def test_a_restarted_scheduler_neither_loses_nor_doubles_a_run(tmp_path: Path) -> None:
    counter = tmp_path / "runs.txt"
    argv = [sys.executable, "-c", f"open({str(counter)!r}, 'a').write('x')"]  # stands in for `kernelwright retrain`
    cfg = ScheduleConfig(cron="0 3 * * 0", workdir=str(tmp_path))

    first, job = start_scheduler(cfg, argv)
    planned = job.next_run_time
    assert planned > datetime.now(UTC) and planned.strftime("%A %H:%M") == "Sunday 03:00"
    assert (job.coalesce, job.max_instances, job.misfire_grace_time) == (True, 1, cfg.misfire_grace_s)
    first.shutdown()

    second, job = start_scheduler(cfg, argv)  # restarted: the stored job is kept as it was, not added again
    assert [j.id for j in second.get_jobs()] == [JOB_ID] and job.next_run_time == planned
    second.pause()
    second.modify_job(JOB_ID, next_run_time=planned - timedelta(weeks=3))  # down over three run times
    second.shutdown()

    third, job = start_scheduler(cfg, argv)  # back: the missed times run once, coalesced
    deadline = time.monotonic() + 60
    while not _outcomes(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    third.shutdown(wait=True)
    assert counter.read_text() == "x"
    assert [o["exit_status"] for o in _outcomes(tmp_path)] == [0]

    fourth, job = start_scheduler(cfg, argv)
    assert job.next_run_time == planned  # the next regular run, not one more catch-up
    fourth.shutdown()
    assert counter.read_text() == "x"

    moved = ScheduleConfig(cron="30 2 * * 1-5", workdir=str(tmp_path))
    fifth, job = start_scheduler(moved, argv)  # a changed schedule replaces the job
    assert [j.id for j in fifth.get_jobs()] == [JOB_ID] and job.next_run_time.strftime("%H:%M") == "02:30"
    fifth.shutdown()


def test_a_run_due_as_the_scheduler_stops_is_run_or_kept(tmp_path: Path) -> None:
    """A round of the scheduler's thread past its state check when shutdown begins: its due run reaches a
    live executor (and shutdown waits for it) or stays in the store, never spent unrun. The round is held
    where APScheduler 3 logs that it looks for due jobs: after the state check, before the store's lock."""
    counter = tmp_path / "runs.txt"
    argv = [sys.executable, "-c", f"open({str(counter)!r}, 'a').write('x')"]
    cfg = ScheduleConfig(cron="0 3 * * 0", workdir=str(tmp_path))
    scheduler, job = start_scheduler(cfg, argv)
    planned = job.next_run_time
    in_round, release = threading.Event(), threading.Event()

    class HeldLogger:
        def __init__(self, inner: logging.Logger) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

        def debug(self, msg: str, *args: object, **kwargs: object) -> None:
            if msg == "Looking for jobs to run":
                in_round.set()
                release.wait(10)
            self.inner.debug(msg, *args, **kwargs)

    scheduler._logger = HeldLogger(scheduler._logger)
    scheduler.modify_job(JOB_ID, next_run_time=planned - timedelta(weeks=1))  # due: wakes the thread
    assert in_round.wait(10), "the scheduler's round no longer logs where this test holds it"
    stopping = threading.Thread(target=scheduler.shutdown)
    stopping.start()
    time.sleep(0.3)  # shutdown under way while the round is held
    release.set()
    stopping.join(60)
    assert not stopping.is_alive()
    again, job = start_scheduler(cfg, argv)
    again.pause()
    again.shutdown()
    ran = counter.is_file() and counter.read_text() == "x"
    assert ran or job.next_run_time < planned, "the due run was neither run nor kept"


def test_a_failed_run_is_logged_with_its_exit_status(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from kernelwright.retrain.schedule import run_retrain_job

    outcomes = tmp_path / "outcomes"
    assert run_retrain_job([sys.executable, "-c", "raise SystemExit(75)"], 0, str(outcomes)) == 75
    assert run_retrain_job([sys.executable, "-c", "raise SystemExit(1)"], 0, str(outcomes)) == 1
    assert run_retrain_job([sys.executable, "-c", "import time; time.sleep(30)"], 1, str(outcomes)) == 124
    got = [json.loads(p.read_text())["outcome"] for p in sorted(outcomes.glob("*.json"))]
    assert got == ["not run: another retrain holds the lock", "failed", "killed: ran past run_timeout_s"]
    assert "scheduled retrain failed (exit status 1)" in caplog.text


def test_the_command_schedules_announces_and_stops_on_sigterm(tmp_path: Path) -> None:
    import signal
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "kernelwright.cli", "schedule", "--cron", "0 3 * * 0",
                             "--workdir", str(tmp_path)], stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    first = proc.stderr.readline()
    while "scheduled" not in first and proc.poll() is None:
        first = proc.stderr.readline()
    assert "retrain scheduled at '0 3 * * 0' (UTC); next run" in first and "Sunday" not in first
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0 and "scheduler stopped" in proc.stderr.read()
    assert (tmp_path / "schedule.db").is_file()
