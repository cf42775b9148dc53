"""Test backends shared by the serving tests."""

from __future__ import annotations

import asyncio
import threading

from kernelwright.serving.backend import ScriptedBackend


class GatedBackend(ScriptedBackend):
    """Holds every generation until `gate` is set (events across the client's and the app's threads)."""

    def __init__(self, texts: list[str]) -> None:
        super().__init__(texts)
        self.gate, self.entered, self.cancelled = threading.Event(), threading.Event(), threading.Event()

    async def generate(self, prompts, sampling):  # type: ignore[no-untyped-def]
        self.entered.set()
        try:
            await asyncio.to_thread(self.gate.wait, 10)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return await super().generate(prompts, sampling)
