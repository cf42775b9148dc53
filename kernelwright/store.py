"""One command's work folder and MLflow store, resolved once at the command's edge.

    store = Store.of(cfg)        # cfg.workdir / cfg.tracking_uri, else the environment, else local
    setup_tracking(store)        # (kernelwright.tracking) MLflow points there, the experiment selected

The work folder is `--workdir`, else `KERNELWRIGHT_WORKDIR`, else `./.kernelwright`; the tracking
and registry store is `--tracking-uri`, else `MLFLOW_TRACKING_URI`, else the work folder's
`mlflow.db`. A command resolves its `Store` once and hands it down; nothing below reads the
environment again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kernelwright.workdir import resolve_workdir, tracking_uri


class HasStore(Protocol):
    """What every command's config has: the work folder and the MLflow store (None: the defaults)."""

    workdir: str | None
    tracking_uri: str | None


@dataclass(frozen=True)
class Store:
    """The work folder (created) and the tracking + registry store URI of one command."""

    workdir: Path
    tracking_uri: str

    @classmethod
    def resolve(cls, workdir: str | os.PathLike[str] | None = None, uri: str | None = None) -> Store:
        folder = resolve_workdir(workdir)
        return cls(folder, tracking_uri(folder, uri))

    @classmethod
    def of(cls, cfg: HasStore) -> Store:
        return cls.resolve(cfg.workdir, cfg.tracking_uri)

    @property
    def local(self) -> bool:
        """A SQLite store: its artifacts live in the work folder."""
        return self.tracking_uri.startswith("sqlite:")
