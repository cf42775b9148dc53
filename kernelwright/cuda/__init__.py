"""CUDA source tools shared by every stage: find, analyse, check and compile the CUDA in a candidate.

- `spans`: tree-sitter-cuda parsing; the CUDA strings inside a Python candidate; sensitive spans.
- `device_code`: the device half of a source (what NVRTC can compile without torch headers).
- `nvrtc`: NVRTC compiles on any machine: one pool of limited worker processes, one result cache by
  content (in memory and on disk), for every stage.
- `static_checks`: AST checks of a candidate (a real kernel, no fallback, no patching).
- `torch_calls`: PyTorch compute called from a candidate's C++/CUDA host code.
- `split_build` (with `split_syntax`, `split_analysis`, `split_codegen`), `pch`: how a candidate's
  `load_inline` extension is built fast on a GPU host.
- `compile_check` (with `candidate_sources`, `include_policy`, `compile_stages`, `compile_workers`,
  `host_compile`, `host_shims`, `compile_log`, `compile_result`, `source_views`):
  the compile check of a generated candidate, as the kernel server runs it: NVRTC for the device
  code and a syntax-only host compile against torch's headers, in limited worker processes,
  cached by content, includes refused unless they name a system, CUDA or torch header.
"""
