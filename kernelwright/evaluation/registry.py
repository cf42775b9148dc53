"""What the gate reads and writes in MLflow's registry: figures, scopes and the champion aliases.

A registered version carries its suite figures as tags (`kw.eval.*`, both views, with the suite, the
judge version and the GPU type); `promote` points the `champion` alias at a version (the gate,
gate.py, decides when), first setting `previous-champion` to the version it left (`rollback` moves
it back). `gate_lock` makes a gate's read of the champion and its move of the alias one step for every
process of this host and user on one registry: evaluations side by side gate one at a time, each
against the champion the last one left.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from kernelwright.errors import UsageError
from kernelwright.evaluation.metrics import OWN
from kernelwright.verifier.verdict import JUDGE_VERSION
from kernelwright.workdir import sqlite_file

log = logging.getLogger(__name__)
CHAMPION = "champion"
PREVIOUS_CHAMPION = "previous-champion"  # where `champion` pointed before its last move
GATE_KEYS = ("fast_0", "fast_1", "compile_rate")  # the figures the gate compares
TAG = "kw.eval."
GATE_TAG = "kw.gate."
NO_GPU = "none"


def gpu_type() -> str:
    """The name of this machine's first CUDA device, or 'none': figures are comparable only within one."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else NO_GPU


EXTERNAL_SAMPLING = "external"
"""The sampling scope of candidate files generated elsewhere (`evaluate --generations`)."""


def sampling_scope(temperature: float, max_new_tokens: int) -> str:
    """How the candidates were sampled, as the scope records it."""
    return f"temperature={temperature:g},max_new_tokens={max_new_tokens}"


def eval_scope(suite: str, sampling: str, gpu: str | None = None) -> dict[str, str]:
    """What two sets of figures must share to be compared: suite (problems and samples), how the
    candidates were sampled (`sampling_scope`), judge, GPU type."""
    return {"suite": suite, "sampling": sampling, "judge_version": JUDGE_VERSION,
            "gpu_type": gpu if gpu is not None else gpu_type()}


def gate_figures(metrics: dict[str, float], view: str) -> dict[str, float]:
    """The figures the gate compares, in `view` ('own': own-kernel fast_0/fast_1; 'any': KernelBench's)."""
    prefix = OWN if view == "own" else ""
    keys = {"fast_0": prefix + "fast_0", "fast_1": prefix + "fast_1", "compile_rate": "compile_rate"}
    return {k: metrics[src] for k, src in keys.items() if src in metrics}


def recorded_figures(name: str, version: str, scope: dict[str, str], view: str) -> dict[str, float] | None:
    """A version's recorded gate figures in `view`, if it was evaluated in `scope`."""
    tags = MlflowClient().get_model_version(name, version).tags
    if any(tags.get(f"{TAG}{k}") != v for k, v in scope.items()):
        return None
    try:
        recorded = {k[len(TAG):]: float(v) for k, v in tags.items() if k.startswith(TAG) and k[len(TAG):] in
                    (*GATE_KEYS, *(OWN + g for g in GATE_KEYS))}
    except ValueError:
        return None
    figures = gate_figures(recorded, view)
    return figures if len(figures) == len(GATE_KEYS) else None


def record_figures(name: str, version: str, metrics: dict[str, float], scope: dict[str, str]) -> None:
    """Tag the version with its gate figures (both views) and the scope they were measured in."""
    client = MlflowClient()
    for key in (*GATE_KEYS, *(OWN + k for k in GATE_KEYS if k != "compile_rate")):
        if key in metrics:
            client.set_model_version_tag(name, version, f"{TAG}{key}", repr(metrics[key]))
    for key, value in scope.items():
        client.set_model_version_tag(name, version, f"{TAG}{key}", value)


def _store_key(uri: str) -> str:
    """The tracking store a URI names, one spelling per store: a SQLite file's or a local file store's
    path resolved (relative, absolute and `file:` spellings of one store share its gate); a server's
    URI as it is."""
    database = sqlite_file(uri)
    if database is not None:
        return "sqlite:" + str(database.resolve())
    if uri.startswith("file://"):
        return "file:" + str(Path(uri[len("file://"):]).resolve())
    if "://" in uri or uri.startswith("databricks"):
        return uri
    return "file:" + str(Path(uri).resolve())


@contextlib.contextmanager
def gate_lock(name: str) -> Iterator[None]:
    """Hold the gate of registered model `name` in this tracking store (a file lock, released when the
    process dies): nothing else on this host moves its champion meanwhile. Other threads and processes
    wait; the thread that holds it may take it again."""
    import mlflow
    from filelock import FileLock

    key = hashlib.sha256(f"{_store_key(mlflow.get_tracking_uri())}\0{name}".encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"kw_gate_{os.getuid()}_{key}.lock"
    with FileLock(path, is_singleton=True):  # one object per file in this process: a thread may take it again
        yield


def alias_version(name: str, alias: str) -> str | None:
    """The version `alias` points to, or None when it is not set (or the model is not registered)."""
    try:
        return str(MlflowClient().get_model_version_by_alias(name, alias).version)
    except MlflowException:
        return None


def promote(name: str, version: str, reason: str) -> str | None:
    """Point `champion` at `version`, setting `previous-champion` to where it pointed first (returned)."""
    client = MlflowClient()
    previous = alias_version(name, CHAMPION)
    if previous is not None and previous != version:
        client.set_registered_model_alias(name, PREVIOUS_CHAMPION, previous)
    client.set_registered_model_alias(name, CHAMPION, version)
    client.set_model_version_tag(name, version, f"{GATE_TAG}promoted_reason", reason[:500])
    log.info("promoted %s v%s to %s (was v%s): %s", name, version, CHAMPION, previous, reason)
    return previous


def rollback(name: str) -> tuple[str, str | None]:
    """Move `champion` back to `previous-champion` and clear the latter; (restored, demoted) versions."""
    client = MlflowClient()
    previous = alias_version(name, PREVIOUS_CHAMPION)
    if previous is None:
        raise UsageError(f"{name} has no {PREVIOUS_CHAMPION} alias: nothing to roll back to")
    demoted = alias_version(name, CHAMPION)
    client.set_registered_model_alias(name, CHAMPION, previous)
    client.delete_registered_model_alias(name, PREVIOUS_CHAMPION)
    if demoted is not None and demoted != previous:
        client.set_model_version_tag(name, demoted, f"{GATE_TAG}rolled_back", "true")
    log.info("rolled %s back: %s is v%s again (was v%s)", name, CHAMPION, previous, demoted)
    return previous, demoted
