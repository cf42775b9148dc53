"""The judge's channel to its runner: every reply is untrusted data, every output file is checked."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import torch

from kernelwright.verifier.channel import (
    MAX_REPLY_BYTES,
    Channel,
    ChannelBroken,
    Described,
    RunnerGone,
    field,
    load_output,
    parse_reply,
    save_output,
)


def _pair() -> tuple[Channel, int, int]:
    """A judge-side channel and the runner's ends of its two pipes (requests in, replies out)."""
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    return Channel(req_w, rep_r), req_r, rep_w


@pytest.mark.parametrize("line", [b"not json", b"[1, 2]", b"\xff\xfe", b'"a string"', b"42",
                                  b"[" * 100_000 + b"]" * 100_000, b'{"a": ' * 50_000 + b"1" + b"}" * 50_000])
def test_a_reply_that_is_not_an_object_is_broken(line: bytes) -> None:
    with pytest.raises(ChannelBroken):
        parse_reply(line)


def test_a_reply_to_another_request_is_broken() -> None:
    channel, _req, rep_w = _pair()
    os.write(rep_w, b'{"op": "finish"}\n')
    with pytest.raises(ChannelBroken, match="'finish' where one to 'call'"):
        channel.request("call", 5.0)


def test_an_endless_reply_is_broken_not_buffered_forever() -> None:
    channel, _req, rep_w = _pair()

    def flood() -> None:
        chunk = b"x" * 65536
        with open(rep_w, "wb", closefd=True) as out:
            for _ in range(MAX_REPLY_BYTES // len(chunk) + 2):
                out.write(chunk)

    writer = threading.Thread(target=flood, daemon=True)
    writer.start()
    with pytest.raises(ChannelBroken, match="longer than"):
        channel.receive(10.0)


def test_a_closed_channel_and_silence_are_a_runner_gone() -> None:
    channel, _req, rep_w = _pair()
    with pytest.raises(RunnerGone) as silent:
        channel.receive(0.2)
    assert silent.value.timed_out
    os.close(rep_w)
    with pytest.raises(RunnerGone) as closed:
        channel.receive(5.0)
    assert not closed.value.timed_out


def test_a_line_left_by_a_runner_that_ended_before_the_request_is_broken() -> None:
    """A forger that writes its verdict at import and exits before the judge asks anything: the
    judge's request finds the runner gone, and the line it left is still read, as a reply to nothing."""
    channel, req_r, rep_w = _pair()
    os.write(rep_w, b'{"op": "ready", "isolation": "x"}\n{"status": "correct", "speedup": 50.0}\n')
    os.close(rep_w)
    os.close(req_r)
    assert channel.receive(5.0)["op"] == "ready"
    with pytest.raises(ChannelBroken, match="answers no request.*correct"):
        channel.request("load", 5.0)


def test_a_runner_that_ended_leaving_nothing_is_gone() -> None:
    channel, req_r, rep_w = _pair()
    os.write(rep_w, b'{"op": "ready", "isolation": "x"}\n{"op": "load", "partial')  # no whole line after ready
    os.close(rep_w)
    os.close(req_r)
    channel.receive(5.0)
    with pytest.raises(RunnerGone, match="closed its input"):
        channel.request("load", 5.0)


@pytest.mark.parametrize(("reply", "kind"), [({"x": True}, (int, float)), ({"x": "1.0"}, float),
                                             ({"x": float("inf")}, float), ({}, int)])
def test_fields_of_the_wrong_kind_are_broken(reply: dict, kind: type) -> None:
    with pytest.raises(ChannelBroken):
        field(reply, "x", kind)


def test_an_output_round_trips_at_its_declared_size_only(tmp_path: Path) -> None:
    out = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    header = save_output(out, tmp_path, "1.bin")
    header["device"] = "cuda"  # as a CUDA output's header says; the file is the same bytes
    assert torch.equal(load_output(dict(header), tmp_path, device="cpu"), out)
    save_output(out, tmp_path, "2.bin")
    for bad in ({"shape": [4, 4]}, {"dtype": "float64"}, {"dtype": "object"}, {"shape": [-1]},
                {"file": "../2.bin"}, {"file": "missing.bin"}):
        with pytest.raises(ChannelBroken):
            load_output({**header, "file": "2.bin", **bad}, tmp_path, device="cpu")


def test_what_is_no_cuda_tensor_is_described_not_loaded(tmp_path: Path) -> None:
    described = load_output(save_output((1, 2), tmp_path, "t.bin"), tmp_path, device="cpu")
    assert isinstance(described, Described) and described.kind == "builtins.tuple"
    cpu = load_output(save_output(torch.ones(2), tmp_path, "c.bin"), tmp_path, device="cpu")
    assert isinstance(cpu, Described) and cpu.device == "cpu"
    with pytest.raises(ChannelBroken):
        load_output(["not", "an", "object"], tmp_path, device="cpu")
