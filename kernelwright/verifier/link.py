"""The judge's handle on its runner: one request at a time over the channel, a runner's own
rejection raised as `RunnerRejected` (checked against the known reasons by the judge)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelwright.verifier.channel import Channel

REQUEST_S = 600.0  # the longest one request may take; the whole run is bounded by verify's timeout


@dataclass
class Link:
    """The judge's handle on its runner: the channel, the runner's output folder, the request limit."""

    channel: Channel
    outbox: Path
    request_s: float = REQUEST_S

    def ask(self, op: str, **fields: Any) -> dict[str, Any]:
        reply = self.channel.request(op, self.request_s, **fields)
        if "rejected" in reply:
            raise RunnerRejected(str(reply["rejected"])[:80], str(reply.get("detail", ""))[:2000])
        return reply


class RunnerRejected(Exception):
    """The runner reported a rejection of its own candidate (checked against the known reasons by the judge)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail
