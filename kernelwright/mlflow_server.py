"""`kernelwright mlflow-server`: the MLflow UI, tracking and registry server over the work folder's store.

    kernelwright mlflow-server                      # http://127.0.0.1:5000, over ./.kernelwright/
    kernelwright mlflow-server --backend-store-uri postgresql://kw@db:5432/mlflow --host 0.0.0.0

The store's schema is upgraded first (`mlflow db upgrade`); then the server replaces this process,
so a supervisor's SIGTERM reaches it rather than an orphan.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from kernelwright.errors import KernelwrightError, UsageError
from kernelwright.tracking import ui_start_page
from kernelwright.workdir import artifact_root, redacted, resolve_workdir


@dataclass
class MlflowServerConfig:
    """Config of `kernelwright mlflow-server`: a tracking + registry server over the work folder's store."""

    workdir: str | None = field(default=None, metadata={"help": "Work folder. None: ./.kernelwright."})
    host: str = field(default="127.0.0.1", metadata={"help": "Interface to listen on."})
    port: int = field(default=5000, metadata={"help": "TCP port."})
    backend_store_uri: str | None = field(default=None, metadata={
        "help": "Tracking + registry database, e.g. postgresql://user@db:5432/mlflow (its schema is upgraded "
                "before serving). None: sqlite:///<workdir>/mlflow.db."})
    artifacts_destination: str | None = field(default=None, metadata={
        "help": "Where the server keeps artifacts, e.g. s3://bucket/mlflow (MLFLOW_S3_ENDPOINT_URL and AWS_* "
                "for an S3-compatible store, on the server only). None: <workdir>/mlartifacts."})
    serve_artifacts: bool = field(default=True, metadata={
        "help": "Proxy artifact uploads and downloads through the server (clients need no store credentials); "
                "false: clients write to --artifacts-destination themselves."})
    allowed_hosts: str | None = field(default=None, metadata={
        "help": "Comma-separated Host headers accepted (needed behind 0.0.0.0). None: MLflow's default."})
    workers: int = field(default=4, metadata={"help": "Server worker processes."})

    def __post_init__(self) -> None:
        if not 1 <= self.port <= 65535:
            raise ValueError(f"port must be a TCP port, 1 to 65535, not {self.port}")
        if self.workers < 1:
            raise ValueError(f"workers must be 1 or more, not {self.workers}")


def mlflow_server_commands(cfg: MlflowServerConfig) -> tuple[list[str], list[str]]:
    """The schema upgrade and the server command lines for `cfg`."""
    workdir = resolve_workdir(cfg.workdir)
    store = cfg.backend_store_uri or f"sqlite:///{workdir / 'mlflow.db'}"
    if "://" not in store:
        raise UsageError(f"--backend-store-uri {store!r} is not a database URI (postgresql://..., sqlite:///...)")
    dest = cfg.artifacts_destination or str(artifact_root(workdir))
    mlflow = [sys.executable, "-m", "mlflow"]
    server = [*mlflow, "server", "--backend-store-uri", store, "--host", cfg.host, "--port", str(cfg.port),
              "--workers", str(cfg.workers)]
    server += (["--serve-artifacts", "--artifacts-destination", dest] if cfg.serve_artifacts
               else ["--no-serve-artifacts", "--default-artifact-root", dest])
    server += ["--allowed-hosts", cfg.allowed_hosts] if cfg.allowed_hosts else []
    return [*mlflow, "db", "upgrade", store], server


def run_mlflow_server(cfg: MlflowServerConfig, say: Callable[[str], None]) -> None:
    """Upgrade the store's schema, then become the server (never returns on success)."""
    upgrade, server = mlflow_server_commands(cfg)
    store = redacted(upgrade[-1])
    done = subprocess.run(upgrade, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise KernelwrightError(f"`mlflow db upgrade {store}` failed: {redacted(last)}")
    page = ui_start_page(f"http://{cfg.host}:{cfg.port}", upgrade[-1])  # opens as model training, not GenAI
    say(f"MLflow UI on {page} (store {store}, schema up to date)")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(server[0], server)  # the server in this process: a supervisor's SIGTERM reaches it, not an orphan
