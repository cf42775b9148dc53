"""NVRTC on any machine: one pool of worker processes and one result cache for every stage.

- `program`: NVRTC itself (loading it, its include folders, one compile);
- `worker`: the worker process, `python -m kernelwright.cuda.nvrtc.worker`;
- `pool`: `NvrtcPool`, long-lived workers under memory and CPU-time limits, one pool per process;
- `cache`: results by content hash, in memory and on disk (atomic writes);
- `device`: the device code of CUDA sources compiled through both (`compile_many`,
  `compile_device_code`), for curation's NVRTC filter and evaluation; the kernel server's compile
  check (`compile_stages`) uses the pool and the cache directly.

The names most callers need are importable from here.
"""

from kernelwright.cuda.nvrtc.device import (
    CompileBatch,
    NvrtcResult,
    NvrtcUnavailable,
    compile_device_code,
    compile_many,
)
from kernelwright.cuda.nvrtc.program import DEFAULT_ARCH, include_dirs, nvrtc_version

__all__ = ["DEFAULT_ARCH", "CompileBatch", "NvrtcResult", "NvrtcUnavailable", "compile_device_code", "compile_many",
           "include_dirs", "nvrtc_version"]
