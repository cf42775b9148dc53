"""`kernelwright serve` in a subprocess: bodies cut short over a real socket, and SIGTERM's drain."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
BODY = {"instruction": "Write a ReLU kernel.", "compile_check": False}
PARTIAL = (b"POST /v1/kernels/generate HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
           b"Content-Length: 500\r\n\r\n{\"instruction\": \"Write")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _until(check: Callable[[], Any], what: str, limit_s: float = 60) -> Any:
    """Poll `check` until it returns something truthy (a bound for a broken server, not a timing assertion)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {limit_s} s")


class Server:
    def __init__(self, folder: Path, text: str, *flags: str, gated: bool = False) -> None:
        self.folder, self.port = folder, _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        (folder / "texts.json").write_text(json.dumps([text]))
        entry = ["-m", "tests.serving.gated_serve", str(folder)] if gated else ["-m", "kernelwright.cli"]
        cmd = [sys.executable, *entry, "serve", "--backend", f"scripted:{folder / 'texts.json'}", "--port",
               str(self.port), "--no_compile_host", "--compile_cache_dir", str(folder / "cache"), "--workdir",
               str(folder), *flags]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "KERNELWRIGHT_API_KEYS": ""}
        self.log = (folder / "server.log").open("w")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        _until(self._ready, "the server to be ready")

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"the server exited: {self.output()}")
        try:
            return httpx.get(f"{self.base}/readyz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def output(self) -> str:
        self.log.flush()
        return (self.folder / "server.log").read_text()

    def count(self, status: int, path: str = "/v1/kernels/generate", method: str = "POST") -> float:
        for line in httpx.get(f"{self.base}/metrics", timeout=10).text.splitlines():
            if (line.startswith("kernelwright_http_requests_total{") and f'path="{path}"' in line
                    and f'method="{method}"' in line and f'status_code="{status}"' in line):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self.log.close()


@pytest.fixture
def start(tmp_path: Path, good_text: str) -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def make(*flags: str, gated: bool = False) -> Server:
        folder = tmp_path / f"server{len(servers)}"
        folder.mkdir()
        servers.append(Server(folder, good_text, *flags, gated=gated))
        return servers[-1]

    yield make
    for server in servers:
        server.stop()


def test_a_body_cut_short_counts_as_499_and_a_late_one_answers_408(start: Callable[..., Server]) -> None:
    server = start("--body_timeout_s", "1")
    with socket.create_connection(("127.0.0.1", server.port)) as gone:
        gone.sendall(PARTIAL)  # 500 bytes announced, fewer sent, then the client hangs up
    _until(lambda: server.count(499), "the 499 of the client that hung up")
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as late:
        late.sendall(PARTIAL)  # the client stays, silent
        answer = late.makefile("rb").read()  # to the end: the server closes the connection after its answer
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"did not arrive within 1 s" in answer and b"connection: close" in answer.lower()
    assert (server.count(499), server.count(408), server.count(500)) == (1.0, 1.0, 0.0), server.output()


def _held_request(server: Server) -> tuple[threading.Thread, list[Any]]:
    """A /v1 request in flight (its generation waits for the gate's release file)."""
    answers: list[Any] = []

    def send() -> None:
        try:
            answers.append(httpx.post(f"{server.base}/v1/kernels/generate", json=BODY, timeout=120))
        except httpx.TransportError as exc:
            answers.append(exc)

    thread = threading.Thread(target=send)
    thread.start()
    _until(lambda: (server.folder / "entered").exists(), "the held request to reach the backend")
    return thread, answers


def _draining_readyz(server: Server) -> httpx.Response:
    """After SIGTERM: /readyz over new connections until it says so (a refused connection fails the test)."""
    return _until(lambda: (r := httpx.get(f"{server.base}/readyz", timeout=10)).status_code == 503 and r,
                  "/readyz to answer 503")  # type: ignore[no-any-return]


def test_sigterm_drains_the_requests_in_flight_while_new_ones_answer_503(start: Callable[..., Server]) -> None:
    server = start("--drain_timeout_s", "120", gated=True)
    thread, answers = _held_request(server)
    server.proc.send_signal(signal.SIGTERM)
    ready = _draining_readyz(server)
    refused = httpx.get(f"{server.base}/v1/models", timeout=10)
    alive = server.proc.poll() is None
    (server.folder / "release").touch()
    thread.join(60)
    server.proc.wait(60)
    assert ready.json()["status"] == "draining" and "retry-after" in ready.headers
    assert refused.status_code == 503 and "retry-after" in refused.headers, refused.text
    assert "shutting down" in refused.json()["error"]["message"]
    assert alive and isinstance(answers[0], httpx.Response) and answers[0].status_code == 200, answers
    assert "Traceback" not in server.output()


def test_the_drain_ends_at_drain_timeout_s(start: Callable[..., Server]) -> None:
    """A request that never finishes does not keep the process: cut off at drain_timeout_s, it answers 503."""
    server = start("--drain_timeout_s", "2", gated=True)
    thread, answers = _held_request(server)
    server.proc.send_signal(signal.SIGTERM)
    ready = _draining_readyz(server)
    server.proc.wait(60)  # the held request is never released
    thread.join(60)
    assert ready.json()["status"] == "draining"
    cut = answers[0]
    assert isinstance(cut, httpx.Response) and cut.status_code == 503 and "retry-after" in cut.headers, answers
    assert "shut down before this request was answered" in cut.json()["error"]["message"]
    assert "Traceback" not in server.output()


def test_a_second_sigterm_ends_the_drain_at_once(start: Callable[..., Server]) -> None:
    server = start("--drain_timeout_s", "600", gated=True)
    thread, answers = _held_request(server)
    server.proc.send_signal(signal.SIGTERM)
    _draining_readyz(server)
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(60)  # well before the 600 s drain; the held request is never released
    thread.join(60)
    assert isinstance(answers[0], httpx.Response) and answers[0].status_code == 503, answers
