"""Opt-in MLflow logging of served requests, so that retraining can learn from them (`log_requests`).

Each answered kernel or completion request adds one row per candidate: the request id, the route,
the model version, the prompt, the kernel code, its CUDA sources and its compile result (status
and log of each stage, repairs). Rows go to one MLflow run per server (run name `serve`, in the
`kernelwright-served` experiment) as the table artifact `served/requests.json`, appended every
`log_requests_batch` rows and at shutdown, off the event loop; at shutdown the whole table is
also logged as the run's `served-requests` dataset. Headers (and so API keys) are never logged.
`mlflow.load_table("served/requests.json", run_ids=[...])` reads it back.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from kernelwright.serving.config import ServeConfig
from kernelwright.serving.schemas import CompileInfo

log = logging.getLogger(__name__)
EXPERIMENT = "kernelwright-served"
TABLE = "served/requests.json"


def _stage(info: CompileInfo | None, name: str) -> tuple[str | None, str | None]:
    if info is None:
        return None, None
    stage = getattr(info, name)
    return str(stage.status), str(stage.log)


def rows_of(request_id: str, route: str, version: str | None, prompt: Any,
            candidates: list[tuple[str, list[str], CompileInfo | None, int]]) -> list[dict[str, Any]]:
    """One row per candidate: what the model was asked, what it wrote, and whether that compiled."""
    text = prompt if isinstance(prompt, str) else json.dumps(prompt)
    rows = []
    for index, (code, sources, info, repairs) in enumerate(candidates):
        (device, device_log), (host, host_log) = _stage(info, "device"), _stage(info, "host")
        rows.append({"request_id": request_id, "route": route, "model_version": version, "prompt": text,
                     "candidate": index, "code": code, "cuda_sources": json.dumps(sources),
                     "compile_ok": None if info is None else bool(info.ok), "device_status": device,
                     "device_log": device_log, "host_status": host, "host_log": host_log, "repairs": repairs})
    return rows


@dataclass
class RequestLog:
    cfg: ServeConfig
    pending: list[dict[str, Any]] = field(default_factory=list)
    logged: list[dict[str, Any]] = field(default_factory=list)
    run_id: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, rows: list[dict[str, Any]]) -> bool:
        """Keep the rows; True when a batch is ready to write."""
        with self._lock:
            self.pending += rows
            return len(self.pending) >= self.cfg.log_requests_batch

    def _client(self) -> Any:
        from mlflow import MlflowClient

        from kernelwright.tracking import ensure_experiment
        from kernelwright.workdir import resolve_workdir, tracking_uri

        client = MlflowClient(tracking_uri(resolve_workdir(self.cfg.workdir), self.cfg.tracking_uri))
        if self.run_id is None:
            exp_id = ensure_experiment(client, EXPERIMENT)  # a model-training experiment in MLflow's UI
            self.run_id = client.create_run(exp_id, run_name="serve", tags={"kernelwright.stage": "serve"}).info.run_id
        return client

    def flush(self) -> None:
        """Append the pending rows to the run's table (in a worker thread)."""
        with self._lock:
            rows, self.pending = self.pending, []
        if not rows:
            return
        try:
            self._client().log_table(self.run_id, {k: [r[k] for r in rows] for k in rows[0]}, TABLE)
            self.logged += rows
        except Exception as exc:  # logging must never fail a request or the shutdown
            log.warning("could not log %d served rows to MLflow: %s", len(rows), type(exc).__name__)

    def close(self) -> None:
        """Write what is left, log the whole table as a dataset and end the run."""
        self.flush()
        if self.run_id is None or not self.logged:
            return
        try:
            _log_dataset(self._client(), self.run_id, self.logged)
        except Exception as exc:
            log.warning("could not log the served-requests dataset: %s", type(exc).__name__)


def _log_dataset(client: Any, run_id: str, rows: list[dict[str, Any]]) -> None:
    import mlflow.data
    import pandas as pd
    from mlflow.entities import DatasetInput, InputTag

    dataset = mlflow.data.from_pandas(pd.DataFrame(rows), name="served-requests")  # type: ignore[attr-defined]
    tag = InputTag(key="mlflow.data.context", value="serving")
    client.log_inputs(run_id, datasets=[DatasetInput(dataset._to_mlflow_entity(), tags=[tag])])
    client.set_terminated(run_id)


async def record(state: Any, rows: list[dict[str, Any]]) -> None:
    """Add a request's rows when logging is on; a full batch is written off the event loop."""
    request_log: RequestLog | None = state.request_log
    if request_log is not None and request_log.add(rows):
        await asyncio.to_thread(request_log.flush)
