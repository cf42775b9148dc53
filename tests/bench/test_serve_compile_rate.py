"""bench/serve_compile_rate.py against a stand-in server: the answers counted in the sample's order, however
many requests are in flight and whichever finishes first; a failed request counts as not compiling."""

from __future__ import annotations

import importlib
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "bench"))
scr = importlib.import_module("serve_compile_rate")


class StandIn(BaseHTTPRequestHandler):
    in_flight = 0
    most = 0
    lock = threading.Lock()

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # /readyz
        self.send_response(200)
        self.end_headers()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        number = int(body["reference_code"].split("=")[1])
        with StandIn.lock:
            StandIn.in_flight += 1
            StandIn.most = max(StandIn.most, StandIn.in_flight)
        time.sleep(0.05 * (5 - number % 5))  # later problems answer sooner
        with StandIn.lock:
            StandIn.in_flight -= 1
        if number == 3:
            self.send_response(500)
            self.end_headers()
            return
        answer = {"candidates": [{"compile": {"ok": number % 2 == 0}}], "usage": {"completion_tokens": 7}}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_answers_in_the_samples_order_with_requests_side_by_side(tmp_path: Path) -> None:
    problems = tmp_path / "heldout"
    problems.mkdir()
    for i in range(6):
        (problems / f"p{i}.py").write_text(f"x ={i}")
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        out = tmp_path / "rate.json"
        assert scr.main(["--url", url, "--problems", str(problems), "--count", "6", "--concurrency", "3",
                         "--json", str(out)]) == 0
    finally:
        server.shutdown()
    got = json.loads(out.read_text())
    assert [r["problem"] for r in got["rows"]] == [f"p{i}.py" for i in range(6)]
    assert got["compiled"] == 3 and got["failed_requests"] == 1 and got["concurrency"] == 3  # p0, p2, p4
    assert 1 < StandIn.most <= 3
    assert got["complete"] is True and got["repaired"] == 0 and got["compiled_after_repair"] == 0
    assert not (tmp_path / "rate.partial.json").exists()  # the whole figure replaced the running one
    slowest = max(r["latency_s"] for r in got["rows"])
    assert got["latency"]["max_s"] == round(slowest, 2) and 0 < got["latency"]["median_s"] <= slowest
    assert got["latency"]["tokens_per_answer_s"] > 0  # five answers of 7 tokens; the 500 has none


def test_a_run_cut_short_leaves_the_answers_so_far(tmp_path: Path, monkeypatch) -> None:
    problems = tmp_path / "heldout"
    problems.mkdir()
    for i in range(4):
        (problems / f"p{i}.py").write_text(f"x ={i}")
    answers = iter([{"candidates": [{"compile": {"ok": True}, "repairs": 1}]},
                    {"candidates": [{"compile": {"ok": False}, "repairs": 1}]}])

    def post(url: str, body: dict, timeout_s: float) -> tuple[int, dict]:
        try:
            return 200, next(answers)
        except StopIteration:  # the time ran out after two answers
            raise KeyboardInterrupt from None

    monkeypatch.setattr(scr, "wait_ready", lambda url, timeout_s: True)
    monkeypatch.setattr(scr, "post", post)
    out = tmp_path / "rate.json"
    try:
        scr.main(["--problems", str(problems), "--count", "4", "--json", str(out)])
    except KeyboardInterrupt:
        pass
    assert not out.exists()
    got = json.loads((tmp_path / "rate.partial.json").read_text())
    assert got["complete"] is False and got["problems"] == 2 and got["compiled"] == 1
    assert got["repaired"] == 2 and got["compiled_after_repair"] == 1
