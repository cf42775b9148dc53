"""The PostgreSQL server of the dev and CI machines (127.0.0.1:5432, trust auth), or a clear skip.

KERNELWRIGHT_TEST_PG names another server. Under CI (CI=true) an unreachable server fails the tests
instead of skipping them: CI machines run one.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

PG = os.environ.get("KERNELWRIGHT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def pg_or_skip() -> str:
    import psycopg

    try:
        psycopg.connect(PG, connect_timeout=3).close()
    except psycopg.Error as exc:
        reason = f"no PostgreSQL server at {PG} ({str(exc).strip().splitlines()[0]})"
        if os.environ.get("CI") == "true":
            pytest.fail(reason + "; CI machines run one")
        pytest.skip(reason)
    return PG


@contextmanager
def scratch_database() -> Iterator[str]:
    """A fresh, empty database on the server (dropped afterwards); its URI."""
    import psycopg

    base = pg_or_skip()
    name = f"kw_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, connect_timeout=3, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield base.rsplit("/", 1)[0] + f"/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
