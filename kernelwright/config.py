"""Stage configs: one dataclass per stage, filled from a YAML file and CLI flags.

    kernelwright train --config my.yaml --max-steps 50

Order of precedence: dataclass defaults < `--config FILE.yaml` < CLI flags. A key in the YAML
file that is not a field of the stage's config, or an unknown flag, ends the command with exit
status 2 and a message that names it (argparse's own convention for usage errors).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from transformers import HfArgumentParser

from kernelwright.errors import UsageError
from kernelwright.workdir import redacted

T = TypeVar("T")


def field_names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def read_yaml_config(path: Path, cls: type) -> dict[str, Any]:
    """Read a YAML mapping of config values and reject keys that are not fields of `cls`."""
    if not path.is_file():
        raise UsageError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise UsageError(f"config file {path} is not valid YAML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"config file {path} is not UTF-8 text (byte {exc.start})") from None
    except RecursionError:
        raise UsageError(f"config file {path} nests too deeply to read") from None
    if not isinstance(data, dict):
        raise UsageError(f"config file {path} must hold a mapping of keys to values, not {type(data).__name__}")
    known = set(field_names(cls))
    unknown = sorted(k for k in data if k.replace("-", "_") not in known)
    if unknown:
        raise UsageError(
            f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(repr(k) for k in unknown)} in {path} "
            f"(known keys for {cls.__name__}: {', '.join(sorted(known))})"
        )
    return {k.replace("-", "_"): v for k, v in data.items()}


def typed_values(parser: argparse.ArgumentParser, values: dict[str, Any], path: Path) -> dict[str, Any]:
    """A config file's values converted as their flags' values are (the same types and choices), so a
    file cannot hand a field what its flag would refuse: UsageError naming the key otherwise."""
    actions = {a.dest: a for a in parser._actions}  # noqa: SLF001 - argparse keeps them nowhere public
    out: dict[str, Any] = {}
    for key, value in values.items():
        action = actions.get(key)
        if action is None or value is None or not callable(action.type):
            out[key] = value
            continue
        many = action.nargs in ("+", "*")
        items = value if many and isinstance(value, list) else [value]
        if (many and not isinstance(value, list)) or not all(isinstance(v, str | int | float) for v in items):
            want = "a list of values" if many else "one value"
            raise UsageError(f"config file {path}: {key} must be {want}, not {type(value).__name__}")
        try:
            converted = [action.type(v if isinstance(v, str) else str(v)) for v in items]
        except (TypeError, ValueError, argparse.ArgumentTypeError) as exc:
            raise UsageError(f"config file {path}: {key}: invalid value {value!r} ({exc})") from None
        if action.choices is not None and any(v not in action.choices for v in converted):
            raise UsageError(f"config file {path}: {key} must be one of {', '.join(map(str, action.choices))}")
        out[key] = converted if many else converted[0]
    return out


def build_parser(cls: type, prog: str, description: str | None = None) -> argparse.ArgumentParser:
    parser = HfArgumentParser(cls, prog=prog, description=description)
    parser.add_argument("--config", type=Path, default=None, help="YAML file of config values (CLI flags win)")
    return parser


def parse_config(cls: type[T], argv: Sequence[str], prog: str, description: str | None = None) -> T:
    """Parse `argv` into `cls`, applying `--config` YAML values as defaults under the flags."""
    parser = build_parser(cls, prog, description)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config", type=Path, default=None)
    known, _ = pre.parse_known_args(list(argv))
    if known.config is not None:
        parser.set_defaults(**typed_values(parser, read_yaml_config(known.config, cls), known.config))
    ns = parser.parse_args(list(argv))  # unknown flags: argparse prints usage and exits 2
    values = {k: v for k, v in vars(ns).items() if k != "config"}
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None  # main() names the command before it


def config_to_params(cfg: Any, prefix: str = "") -> dict[str, str]:
    """Flatten a config dataclass into MLflow params (strings, `prefix.` before each key; no URI's password)."""
    return {f"{prefix}{k}": redacted(str(v)) for k, v in dataclasses.asdict(cfg).items()}


def config_yaml(cfg: Any, command: str) -> str:
    """The config as the `--config` file of `kernelwright <command>` that gives this config back (paths as
    strings, tuples as lists, no URI's password), after a comment saying so."""
    values = config_record(cfg)
    header = (f"# kernelwright {command} --config THIS_FILE runs with these settings again; flags given beside it "
              "win\n")
    return header + yaml.safe_dump(values, sort_keys=False, allow_unicode=True)


def _plain(value: Any) -> Any:
    """A config value as YAML's plain types."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, str):
        return redacted(value)
    return value


def config_record(cfg: Any) -> dict[str, Any]:
    """A config dataclass as a JSON- and YAML-ready mapping (paths as strings, tuples as lists), with no URI's
    password."""
    return {k: _plain(v) for k, v in dataclasses.asdict(cfg).items()}
