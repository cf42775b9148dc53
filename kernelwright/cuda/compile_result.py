"""Settings and results of the compile check (`compile_check`): plain dataclasses, JSON both ways."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from kernelwright.cuda.nvrtc.program import DEFAULT_ARCH

OK, FAILED, UNAVAILABLE, SKIPPED = "ok", "failed", "unavailable", "skipped"
HOST_FRONTENDS = ("auto", "libclang", "gcc")  # the host stage's checkers (CompileCheckSettings.host_frontend)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernelwright" / "compile_check"


@dataclass(frozen=True)
class CompileCheckSettings:
    """How `check_candidate` / `check_many` compile. Each field's help is in its metadata."""

    arch: str = field(default=DEFAULT_ARCH, metadata={
        "help": "NVRTC virtual architecture of the device stage, e.g. compute_90 (H100/H200)."})
    cache_dir: Path = field(default_factory=default_cache_dir, metadata={
        "help": "Folder of the result cache (results/, one JSON per stage and content hash) and, unless "
                "pch_dir is set, of the precompiled torch header (pch/, about 0.8 GB, built once)."})
    timeout_s: float = field(default=60.0, metadata={
        "help": "Wall-clock limit per compile, seconds; also its CPU-time limit. 0: no limit."})
    memory_mb: int = field(default=4096, metadata={
        "help": "Address-space limit per compiler process (g++, NVRTC worker), MiB. 0: no limit."})
    host: bool = field(default=True, metadata={
        "help": "Run the host stage (C++ syntax check of cpp_sources and the host part of cuda_sources). "
                "False: host status 'skipped', and `ok` follows the device stage alone."})
    workers: int = field(default=2, metadata={
        "help": "Compiles run at once (threads driving g++, NVRTC worker processes). At least 1."})
    host_frontend: str = field(default="auto", metadata={
        "help": "Host checker: libclang (PyPI libclang: torch's templates instantiated once in its precompiled "
                "header, under 1 s a check), gcc (g++ -fsyntax-only, ~8 s: its header cannot keep them), or auto "
                "(libclang when installed, else gcc). Both need g++ for its C++ headers."})
    pch_dir: Path | None = field(default=None, metadata={
        "help": "Folder of the precompiled torch/extension.h (and the host header shims). None: <cache_dir>/pch."})

    def __post_init__(self) -> None:
        if self.host_frontend not in HOST_FRONTENDS:
            raise ValueError(f"host_frontend must be auto, libclang or gcc, not {self.host_frontend!r}")

    @staticmethod
    def help() -> dict[str, str]:
        return {f.name: f.metadata["help"] for f in fields(CompileCheckSettings)}


@dataclass
class StageResult:
    status: str  # ok | failed | unavailable | skipped (did not run: the log says why)
    log: str = ""  # filtered compiler log (never text of files outside the candidate's sources)
    seconds: float = 0.0  # compile time (a cached result keeps the time of the compile that made it)
    cached: bool = False  # True: read from the result cache, nothing compiled

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> StageResult:
        return StageResult(status=str(data["status"]), log=str(data.get("log", "")),
                           seconds=float(data.get("seconds", 0.0)), cached=bool(data.get("cached", False)))


@dataclass
class CompileResult:
    ok: bool  # both stages compiled (device alone when the host stage is skipped)
    device: StageResult
    host: StageResult
    cuda_sources: list[str] = field(default_factory=list)  # the CUDA sources found in the candidate

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "device": self.device.to_dict(), "host": self.host.to_dict(),
                "cuda_sources": list(self.cuda_sources)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> CompileResult:
        return CompileResult(ok=bool(data["ok"]), device=StageResult.from_dict(data["device"]),
                             host=StageResult.from_dict(data["host"]), cuda_sources=list(data["cuda_sources"]))


def combined_ok(device: StageResult, host: StageResult) -> bool:
    return device.status == OK and host.status in (OK, SKIPPED)
