"""A small folder of real code to pretrain on in seconds, with an evaluation problem planted in it."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path

import pytest

from kernelwright.base_model.corpus import exclusion_folders

STDLIB = Path(sysconfig.get_paths()["stdlib"])
PLANTED = "planted_eval_problem.py"


@pytest.fixture()
def code_dir(tmp_path: Path) -> Path:
    """A few standard-library modules (~60k characters) and a copy of one evaluation-suite problem."""
    out = tmp_path / "code"
    out.mkdir()
    for name in ("textwrap.py", "colorsys.py", "bisect.py", "heapq.py", "fnmatch.py", "shlex.py"):
        shutil.copy(STDLIB / name, out / name)
    suite = exclusion_folders()[1]
    shutil.copy(sorted(suite.rglob("*.py"))[0], out / PLANTED)
    return out
