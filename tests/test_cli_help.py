"""`kernelwright <command> --help` answers before the stage's heavy imports (torch, the stage itself)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
from kernelwright.cli import main
try:
    main([sys.argv[1], "--help"])
except SystemExit as exc:
    code = exc.code
else:
    code = 0
stages = any(m.endswith(".stage") or m == "kernelwright.pipeline" for m in sys.modules)
print(code, "torch" in sys.modules, stages)
"""


@pytest.mark.parametrize("command", ["pipeline", "synthesize", "curate", "train", "rl", "evaluate", "verify", "serve",
                                     "base-model"])
def test_help_imports_neither_torch_nor_the_stage(command: str) -> None:
    out = subprocess.run([sys.executable, "-c", PROBE, command], capture_output=True, text=True, check=True,
                         timeout=120).stdout.split()
    assert out[-3:] == ["0", "False", "False"], out
