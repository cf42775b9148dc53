"""The runner's end of the channel for tests of its request loop (runner.serve): requests replayed,
the ops of the replies kept in order."""

from __future__ import annotations

from typing import Any


class ScriptedEnd:
    """Replays `ops` as requests and appends each reply's op to `replies`."""

    def __init__(self, ops: list[str], replies: list[str] | None = None) -> None:
        self.requests = [{"op": op} for op in ops]
        self.replies: list[str] = [] if replies is None else replies

    def next_request(self) -> dict[str, Any] | None:
        return self.requests.pop(0) if self.requests else None

    def reply(self, op: str, **_fields: Any) -> None:
        self.replies.append(op)
