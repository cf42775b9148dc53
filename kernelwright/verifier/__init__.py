"""The verifier: is a candidate kernel correct, and how fast is it against the PyTorch reference?

    kernelwright verify --problem P.py --candidate C.py --json verdict.json

The public API, for evaluation, serving and retraining alike:

    from kernelwright.verifier import VerifyConfig, verify_one, verify_many, Verdict

`verify_one` / `verify_many` run each candidate in a judge process of its own (`judge.py`, which
starts the runner, `runner.py`, the only process that runs the candidate's code) and return
`Verdict`s (`verdict.py`, which lists the reason codes). The protocol is described in
docs/verification.md. Names are loaded on first use, so `python -m kernelwright.verifier.judge`
starts without importing the parent's side.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelwright.verifier.config import VerifyConfig
    from kernelwright.verifier.verdict import ShapeResult, Verdict
    from kernelwright.verifier.verify import cuda_available, exit_code, verify_many, verify_one

_EXPORTS = {
    "Verdict": "kernelwright.verifier.verdict", "ShapeResult": "kernelwright.verifier.verdict",
    "VerifyConfig": "kernelwright.verifier.config", "verify_one": "kernelwright.verifier.verify",
    "verify_many": "kernelwright.verifier.verify", "cuda_available": "kernelwright.verifier.verify",
    "exit_code": "kernelwright.verifier.verify",
}
__all__ = ["ShapeResult", "Verdict", "VerifyConfig", "cuda_available", "exit_code", "verify_many", "verify_one"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'kernelwright.verifier' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
