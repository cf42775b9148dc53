"""Isolation and build (kernelwright.verifier.isolation), on the CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from kernelwright.verifier import isolation


def test_a_build_without_the_header_leaves_it_for_the_others(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Stock `load_inline(use_pch=False)` deletes torch's shared precompiled header; a worker's
    candidate with its own host flags must not take it from the workers building beside it."""
    import torch.utils.cpp_extension as ext

    removed: list[bool] = []
    calls: list[dict[str, Any]] = []

    def stock(name: str, cpp_sources: Any, cuda_sources: Any = None, **kw: Any) -> str:
        calls.append(kw)
        if not kw.get("use_pch"):
            ext.remove_extension_h_precompiler_headers()  # what torch's load_inline does
        return name

    monkeypatch.setattr(ext, "remove_extension_h_precompiler_headers", lambda: removed.append(True))
    monkeypatch.setattr(ext, "load_inline", stock)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    isolation.patch_load_inline(str(tmp_path))
    assert ext.load_inline("m", "int f();", None, extra_cflags=["-O2"]) == "m"
    assert calls[0]["use_pch"] is False and not removed
