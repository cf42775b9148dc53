"""CUDA source tools shared by every stage: find, analyse, check and compile the CUDA in a candidate.

- `spans`: tree-sitter-cuda parsing; the CUDA strings inside a Python candidate; sensitive spans.
- `device_code`: the device half of a source (what NVRTC can compile without torch headers).
- `nvrtc`, `nvrtc_cache`: NVRTC compiles on any machine, in memory or cached on disk by content.
- `static_checks`: AST checks of a candidate (a real kernel, no fallback, no patching).
- `split_build`, `pch`: how a candidate's `load_inline` extension is built fast on a GPU host.
"""
