"""The channel between the judge and the runner: requests one way, untrusted replies the other.

- `Channel` (judge side): sends a request as one JSON line on the runner's stdin and reads one
  JSON line back from the reply pipe, within a time limit. A reply is data from the candidate's
  process: anything that is not one JSON object under `MAX_REPLY_BYTES` is `ChannelBroken`, and
  a dead runner is `RunnerGone`; neither is ever an exception the judge does not catch. A runner
  that wrote a line nobody asked for and ended before the next request (a forged verdict, written
  at import) is `ChannelBroken` too: what it left on the channel is read before it is called gone.
- `RunnerEnd` (runner side): reads requests and writes replies on descriptors the runner took
  before the candidate was imported (its stdout goes to stderr then: a candidate's print cannot
  reach the channel by accident, and whatever it writes there on purpose is only a reply to check).
- `save_output` / `load_output`: tensors travel as raw bytes in files of the runner's scratch
  folder, named in the reply with their dtype and shape; the judge reads a file only at the size
  those imply, as one of `DTYPES`, and never unpickles anything.
"""

from __future__ import annotations

import json
import math
import os
import select
import time
from pathlib import Path
from typing import Any

from kernelwright import jsontext

MAX_REPLY_BYTES = 1 << 20
MAX_OUTPUT_BYTES = 8 << 30
DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


class ChannelBroken(Exception):
    """The runner's reply is not a reply: garbage, too long, not an object, or a missing field."""


class RunnerGone(Exception):
    """The runner closed the channel (it exited or was killed) or did not answer in time."""

    def __init__(self, detail: str, timed_out: bool = False) -> None:
        super().__init__(detail)
        self.timed_out = timed_out


class Channel:
    """The judge's end: `request(op, **fields)` returns the runner's reply (a dict)."""

    def __init__(self, to_runner: int, from_runner: int) -> None:
        self._out, self._in = to_runner, from_runner
        self._buffer = b""

    def send(self, op: str, **fields: Any) -> None:
        line = (json.dumps({"op": op, **fields}) + "\n").encode()
        try:
            os.write(self._out, line)
        except (BrokenPipeError, OSError) as exc:
            raise RunnerGone(f"the runner closed its input ({exc.__class__.__name__})") from None

    def receive(self, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RunnerGone(f"no reply within {timeout_s:.0f} s", timed_out=True)
            ready, _, _ = select.select([self._in], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._in, 65536)
            if not chunk:
                raise RunnerGone("the runner closed the channel")
            self._buffer += chunk
            if len(self._buffer) > MAX_REPLY_BYTES and b"\n" not in self._buffer[:MAX_REPLY_BYTES]:
                raise ChannelBroken(f"a reply longer than {MAX_REPLY_BYTES} bytes")
        line, self._buffer = self._buffer.split(b"\n", 1)
        return parse_reply(line)

    def request(self, op: str, timeout_s: float, **fields: Any) -> dict[str, Any]:
        try:
            self.send(op, **fields)
        except RunnerGone:
            self._left_unasked()
            raise
        reply = self.receive(timeout_s)
        if reply.get("op") != op:
            raise ChannelBroken(f"a reply to {reply.get('op')!r} where one to {op!r} was due")
        return reply

    def _left_unasked(self) -> None:
        """After a request the runner could no longer take: a reply it wrote before it ended, unread
        so far, answers no request (ChannelBroken); nothing whole left: the caller's RunnerGone."""
        try:
            left = self.receive(0.1)  # its writer is gone or going: what is in the pipe is all there is
        except RunnerGone:
            return
        raise ChannelBroken(f"a line that answers no request, left by a runner that then ended: {str(left)[:80]}")


def parse_reply(line: bytes) -> dict[str, Any]:
    try:
        reply = jsontext.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ChannelBroken(f"a reply that is not JSON: {line[:80]!r}") from None
    if not isinstance(reply, dict):
        raise ChannelBroken(f"a reply that is not an object: {type(reply).__name__}")
    return reply


def field(reply: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    """A field of a reply, of the type the protocol says (bool is not a number here), or ChannelBroken."""
    value = reply.get(name)
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
        raise ChannelBroken(f"reply field {name!r} is {type(value).__name__}, not {_names(kind)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ChannelBroken(f"reply field {name!r} is {value}")
    return value


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _names(kind: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in _kinds(kind))


class RunnerEnd:
    """The runner's end: takes fd 0 (requests) and fd 1 (replies) for itself; fd 1 then points at
    stderr and fd 0 at /dev/null."""

    def __init__(self) -> None:
        self._in, self._out = os.dup(0), os.dup(1)
        os.dup2(2, 1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        self._reader = os.fdopen(self._in, "rb", buffering=0)
        self._buffer = b""

    def next_request(self) -> dict[str, Any] | None:
        while b"\n" not in self._buffer:
            chunk = os.read(self._in, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return dict(json.loads(line))

    def reply(self, op: str, **fields: Any) -> None:
        data = (json.dumps({"op": op, **fields}, default=str) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self._out, view):]


# ---------------------------------------------------------------- tensors as files


def save_output(out: Any, folder: Path, name: str) -> dict[str, Any]:
    """The header of `out` written to `folder/name` as raw bytes; a non-tensor is described only."""
    import torch

    if type(out) is not torch.Tensor:
        return {"kind": f"{type(out).__module__}.{type(out).__name__}"}
    device = out.device.type
    no_storage = bool(out.numel()) and out.untyped_storage().data_ptr() == 0
    header = {"kind": "tensor", "dtype": str(out.dtype).removeprefix("torch."), "shape": list(out.shape),
              "device": device, "no_storage": no_storage, "file": name}
    if not no_storage:
        raw = out.detach().contiguous().reshape(-1).view(torch.uint8).cpu().numpy()
        raw.tofile(folder / name)
    return header


def load_output(header: Any, folder: Path, device: str = "cuda") -> Any:
    """The tensor a header names, on `device`, or a `Described` stand-in for what cannot be one.
    Raises ChannelBroken on a header or file that does not match itself."""
    import numpy as np
    import torch

    if not isinstance(header, dict) or not isinstance(header.get("kind"), str):
        raise ChannelBroken("an output header that is not an object with a kind")
    if header["kind"] != "tensor":
        return Described(header["kind"][:120], "cuda")
    dtype, shape = header.get("dtype"), header.get("shape")
    if dtype not in DTYPES or not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise ChannelBroken(f"an output header with dtype {dtype!r} and shape {shape!r}")
    if header.get("device") != "cuda" or header.get("no_storage") is True:
        return Described("tensor", str(header.get("device"))[:20], no_storage=header.get("no_storage") is True)
    torch_dtype = getattr(torch, dtype)
    nbytes = math.prod(shape) * torch.empty(0, dtype=torch_dtype).element_size()
    path = folder / str(header.get("file", ""))
    if nbytes > MAX_OUTPUT_BYTES or path.parent != folder or not path.is_file() or path.stat().st_size != nbytes:
        raise ChannelBroken(f"output file {path.name!r} does not hold {nbytes} bytes")
    raw = torch.from_numpy(np.fromfile(path, dtype=np.uint8))
    path.unlink()
    return raw.view(torch_dtype).reshape(shape).to(device)


class Described:
    """What the runner said its output was, where that was no CUDA tensor: judged as such."""

    def __init__(self, kind: str, device: str, no_storage: bool = False) -> None:
        self.kind, self.device, self.no_storage = kind, device, no_storage

    def __repr__(self) -> str:
        return f"{self.kind} on {self.device}"
