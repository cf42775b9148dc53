"""Two retrains at once: the second refuses, with the file lock and with the PostgreSQL advisory lock."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.retrain.config import RetrainConfig
from kernelwright.retrain.job import run_retrain
from kernelwright.retrain.lock import (
    LockHeld,
    default_lock_uri,
    is_postgres,
    libpq_uri,
    lock_key,
    redacted,
    retrain_lock,
)
from tests.retrain._pg import pg_or_skip

# each holder says whether it got the lock, then holds it until killed (at most 120 s)
HOLD_FILE = ("import sys, time; from filelock import FileLock; lock = FileLock(sys.argv[1]); lock.acquire(timeout=30); "
             "print('held', flush=True); time.sleep(120)")
HOLD_PG = ("import sys, time, psycopg; c = psycopg.connect(sys.argv[1], autocommit=True); "
           "row = c.execute('SELECT pg_try_advisory_lock(%s)', (int(sys.argv[2]),)).fetchone(); "
           "print('held' if row[0] else 'busy', flush=True); time.sleep(120)")


def _holder(code: str, *args: str) -> subprocess.Popen[str]:
    """A process holding the lock until it is killed."""
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def _killed(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait()


def test_uris_and_defaults(tmp_path: Path) -> None:
    assert is_postgres("postgresql+psycopg2://u@h/db") and is_postgres("postgres://h/db")
    assert not is_postgres(str(tmp_path / "x.lock")) and not is_postgres("sqlite:///x.db")
    assert libpq_uri("postgresql+psycopg2://u:p@h:5432/db") == "postgresql://u:p@h:5432/db"
    assert redacted("postgresql://kw:secret@db/mlflow") == "postgresql://kw:***@db/mlflow"
    assert default_lock_uri(tmp_path, "sqlite:///x.db") == str(tmp_path / "retrain.lock")
    assert default_lock_uri(tmp_path, "http://mlflow:5000") == str(tmp_path / "retrain.lock")
    assert default_lock_uri(tmp_path, "postgresql://db/mlflow") == "postgresql://db/mlflow"
    assert lock_key("a") != lock_key("b") and -(2**63) <= lock_key("a") < 2**63


def test_a_second_retrain_refuses_while_another_process_holds_the_file_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    workdir = tmp_path / "kw"
    workdir.mkdir()
    holder = _holder(HOLD_FILE, str(workdir / "retrain.lock"))
    try:
        with pytest.raises(LockHeld, match="retrain.lock"):
            run_retrain(RetrainConfig(workdir=str(workdir)))
        assert main(["retrain", "--workdir", str(workdir)]) == 75
        assert not (workdir / "mlflow.db").exists()  # refused before anything was done
    finally:
        _killed(holder)
    with retrain_lock(None, workdir, "sqlite:///x.db", "m") as held:  # the OS released the dead holder's lock
        assert "retrain.lock" in held


def test_the_postgresql_advisory_lock_is_held_by_one_connection_at_a_time(tmp_path: Path) -> None:
    pg = pg_or_skip()
    with retrain_lock(pg, tmp_path, "sqlite:///x.db", "kw-lock-test") as held:
        assert "advisory lock" in held
        with pytest.raises(LockHeld, match="advisory lock"), retrain_lock(pg, tmp_path, "sqlite:///x.db",
                                                                           "kw-lock-test"):
            pass
        with retrain_lock(pg, tmp_path, "sqlite:///x.db", "kw-other-model"):
            pass  # another registered model has its own lock
    with retrain_lock(pg, tmp_path, "sqlite:///x.db", "kw-lock-test"):
        pass  # released on exit


def test_a_retrain_refuses_while_another_host_holds_the_advisory_lock_and_not_after_it_dies(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pg = pg_or_skip()
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    workdir = tmp_path / "kw"
    holder = _holder(HOLD_PG, pg, str(lock_key("kernelwright-coder")))
    try:
        with pytest.raises(LockHeld, match="PostgreSQL"):
            run_retrain(RetrainConfig(workdir=str(workdir), lock_uri=pg))
        assert not (workdir / "mlflow.db").exists()
    finally:
        _killed(holder)
    with retrain_lock(pg, workdir, "sqlite:///x.db", "kernelwright-coder"):
        pass  # the server dropped the dead holder's session and its lock


def test_an_unreachable_lock_server_is_a_one_line_usage_error(tmp_path: Path) -> None:
    from kernelwright.errors import UsageError

    with pytest.raises(UsageError, match="cannot connect"), retrain_lock(
            "postgresql://kw:pw@127.0.0.1:1/none", tmp_path, "sqlite:///x.db", "m"):
        pass
