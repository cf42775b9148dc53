"""`kernelwright mlflow-server`: its command lines and a real server (its schema upgrade on PostgreSQL is
tested with a retrain on that store, tests/retrain/test_postgresql_store.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from kernelwright.cli import main
from kernelwright.mlflow_server import MlflowServerConfig, mlflow_server_commands


def test_default_is_sqlite_in_the_work_folder_with_proxied_artifacts(tmp_path: Path) -> None:
    upgrade, server = mlflow_server_commands(MlflowServerConfig(workdir=str(tmp_path)))
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert upgrade[-3:] == ["db", "upgrade", store]
    assert server[server.index("--backend-store-uri") + 1] == store
    assert server[server.index("--artifacts-destination") + 1] == str(tmp_path / "mlartifacts")
    assert "--serve-artifacts" in server and "--default-artifact-root" not in server


def test_postgresql_store_and_s3_destination(tmp_path: Path) -> None:
    cfg = MlflowServerConfig(workdir=str(tmp_path), backend_store_uri="postgresql://kw@db:5432/mlflow",
                             artifacts_destination="s3://kw-artifacts/mlflow", host="0.0.0.0",
                             allowed_hosts="mlflow.internal")
    upgrade, server = mlflow_server_commands(cfg)
    assert upgrade[-1] == "postgresql://kw@db:5432/mlflow"
    assert server[server.index("--artifacts-destination") + 1] == "s3://kw-artifacts/mlflow"
    assert server[server.index("--allowed-hosts") + 1] == "mlflow.internal"
    _, direct = mlflow_server_commands(MlflowServerConfig(workdir=str(tmp_path), serve_artifacts=False))
    assert "--no-serve-artifacts" in direct and "--default-artifact-root" in direct


def test_a_bad_store_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mlflow-server", "--workdir", str(tmp_path), "--backend-store-uri", "mlflow.db"]) == 2
    (tmp_path / "file").write_text("")
    assert main(["mlflow-server", "--workdir", str(tmp_path), "--backend-store-uri",
                 f"sqlite:///{tmp_path / 'file' / 'mlflow.db'}"]) == 1  # its folder is a file: upgrade fails
    err = capsys.readouterr().err
    assert "mlflow db upgrade" in err and "failed" in err and "Traceback" not in err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_the_server_starts_over_the_work_folder_and_answers(tmp_path: Path) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    cmd = [sys.executable, "-m", "kernelwright.cli", "mlflow-server", "--workdir", str(tmp_path), "--port", str(port),
           "--workers", "1"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/2.0/mlflow/experiments/search"
                                            "?max_results=5", timeout=2) as r:
                    body = json.load(r)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the server did not come up"
                time.sleep(0.5)
        assert [e["name"] for e in body["experiments"]] == ["Default"]
        assert (tmp_path / "mlflow.db").is_file()  # created by `mlflow db upgrade` before serving
        proc.terminate()  # the server itself (kernelwright execs it): nothing of it outlives SIGTERM
        proc.wait(timeout=60)
        assert not _group_alive(proc.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (after a grace period for its workers)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.5)
    return True


@pytest.mark.parametrize("argv, words", [
    (["mlflow-server", "--port", "-1"], "port must be a TCP port, 1 to 65535, not -1"),
    (["mlflow-server", "--port", "70000"], "port must be a TCP port"),
    (["mlflow-server", "--workers", "0"], "workers must be 1 or more"),
    (["serve", "--port", "99999"], "port must be a TCP port, 0 to 65535"),
])
def test_a_port_or_worker_count_out_of_range_is_a_usage_error(argv: list[str], words: str, capsys,
                                                                 tmp_path: Path) -> None:
    from kernelwright.cli import main

    assert main([*argv, "--workdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
    assert err.count(f"kernelwright {argv[0]}") == 1  # the command named once, by the CLI
