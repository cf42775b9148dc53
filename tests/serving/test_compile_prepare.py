"""The server prepares the compile check's precompiled header while the model loads, so the first
request that compiles does not build it."""

from __future__ import annotations

from pathlib import Path

from kernelwright.seed import load_seed_tasks
from kernelwright.serving import compiling
from kernelwright.serving.config import ServeConfig


def test_prepare_builds_the_header_the_checks_use(tmp_path: Path) -> None:
    cfg = ServeConfig(compile_cache_dir=str(tmp_path))
    thread = compiling.prepare_in_background(cfg)
    assert thread is not None and thread.daemon
    thread.join(timeout=600)
    assert not thread.is_alive()
    built = list((tmp_path / "pch").glob("*/pch.json"))
    assert len(built) == 1  # one header, for the host checker this installation picks
    ((info, _sources),) = compiling.check_sync([load_seed_tasks()[0].solution], cfg)
    assert info.ok and info.host.status == "ok", info.host.log
    assert list((tmp_path / "pch").glob("*/pch.json")) == built  # the check built no header of its own


def test_no_host_stage_no_header(tmp_path: Path) -> None:
    cfg = ServeConfig(compile_cache_dir=str(tmp_path), compile_host=False)
    assert compiling.prepare_in_background(cfg) is None
    compiling.prepare(cfg)
    assert not (tmp_path / "pch").exists()
