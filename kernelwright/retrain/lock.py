"""One retrain at a time: a PostgreSQL advisory lock (across hosts) or a file lock (one host).

    postgresql://user@db:5432/mlflow   pg_try_advisory_lock on a dedicated connection, held for the whole
                                       run (alias moves included); PostgreSQL drops it when the process dies
    /var/lib/kernelwright/retrain.lock flock(2) through `filelock`; the OS drops it when the process dies

Neither waits: a second retrain finds the lock taken and ends with `LockHeld` (exit status 75).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kernelwright.errors import KernelwrightError, UsageError
from kernelwright.workdir import redacted

FILE_NAME = "retrain.lock"
PG_SCHEMES = ("postgresql", "postgres")


class LockHeld(KernelwrightError):
    """Another retrain holds the lock: this one did nothing."""

    exit_code = 75  # EX_TEMPFAIL: try again later


def is_postgres(uri: str) -> bool:
    return uri.split(":", 1)[0].split("+", 1)[0] in PG_SCHEMES and "://" in uri


def libpq_uri(uri: str) -> str:
    """An SQLAlchemy URI (postgresql+psycopg2://...) as libpq takes it (postgresql://...)."""
    return re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql://", uri)


def lock_key(name: str) -> int:
    """A signed 64-bit advisory-lock key derived from the registered model's name."""
    return int.from_bytes(hashlib.sha256(f"kernelwright retrain {name}".encode()).digest()[:8], "big", signed=True)


def default_lock_uri(workdir: Path, tracking: str) -> str:
    """The tracking store's PostgreSQL when it is one, else a lock file in the work folder."""
    return tracking if is_postgres(tracking) else str(workdir / FILE_NAME)


@contextmanager
def pg_lock(uri: str, key: int) -> Iterator[None]:
    import psycopg

    try:
        conn = psycopg.connect(libpq_uri(uri), autocommit=True, connect_timeout=10, keepalives=1,
                               keepalives_idle=60, application_name="kernelwright-retrain")
    except psycopg.Error as exc:
        raise UsageError(f"lock {redacted(uri)}: cannot connect: {str(exc).strip().splitlines()[0]}") from None
    try:
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        if not row or not row[0]:
            raise LockHeld(f"another retrain holds the PostgreSQL advisory lock {key} on {redacted(uri)}")
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
    finally:
        conn.close()


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    from filelock import FileLock, Timeout

    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        lock.acquire(blocking=False)
    except Timeout:
        raise LockHeld(f"another retrain holds the lock file {path}") from None
    except OSError as exc:
        raise UsageError(f"lock file {path}: {exc}") from None
    try:
        yield
    finally:
        lock.release()


@contextmanager
def retrain_lock(lock_uri: str | None, workdir: Path, tracking: str, name: str) -> Iterator[str]:
    """Hold the retrain lock for `name` (see the module doc); yields what was locked, in words."""
    uri = lock_uri or default_lock_uri(workdir, tracking)
    if is_postgres(uri):
        with pg_lock(uri, lock_key(name)):
            yield f"PostgreSQL advisory lock on {redacted(uri)}"
    else:
        with file_lock(Path(uri).expanduser()):
            yield f"lock file {uri}"
