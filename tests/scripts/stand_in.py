"""Running a GPU recipe script with a stand-in interpreter: `run_with_stand_in` writes the stand-in (a
bash script that logs `KIND ARG` lines to $LOG and writes what the real command would), runs the recipe
with PYTHON pointing at it, and returns the logged calls in order."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def run_with_stand_in(script: Path, stand_in: str, tmp_path: Path, workdir: Path,
                      env: dict[str, str], cwd: Path | None = None) -> list[tuple[str, str]]:
    python = tmp_path / "python"
    python.write_text(stand_in)
    python.chmod(0o755)
    log = tmp_path / "calls.log"
    log.unlink(missing_ok=True)
    full_env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    full_env |= {"PYTHON": str(python), "LOG": str(log), **env}
    done = subprocess.run(["bash", str(script), str(workdir)], env=full_env, capture_output=True, text=True,
                          timeout=300, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = log.read_text().splitlines() if log.exists() else []
    return [(kind, arg) for kind, arg in (line.split(" ", 1) for line in lines)]
