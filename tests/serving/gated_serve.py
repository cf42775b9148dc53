"""`kernelwright serve` whose scripted generations wait for a file: requests a test holds in flight.

    python -m tests.serving.gated_serve GATE_FOLDER serve [flags ...]

Each generation creates GATE_FOLDER/entered, then waits (cancellably) until GATE_FOLDER/release
exists; everything else is the ordinary command, signals and shutdown included.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from kernelwright import cli
from kernelwright.serving import loading
from kernelwright.serving.backend import Completion, Prompt, Sampling, ScriptedBackend

GATE = Path(sys.argv[1]) if __name__ == "__main__" else Path()


class FileGatedBackend(ScriptedBackend):
    async def generate(self, prompts: Sequence[Prompt], sampling: Sampling) -> list[Completion]:
        (GATE / "entered").touch()
        while not (GATE / "release").exists():
            await asyncio.sleep(0.05)
        return await super().generate(prompts, sampling)


if __name__ == "__main__":
    loading.ScriptedBackend = FileGatedBackend  # type: ignore[misc]
    sys.exit(cli.main(sys.argv[2:]))
