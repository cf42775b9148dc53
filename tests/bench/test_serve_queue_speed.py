"""bench/serve_queue_speed.py on the CPU with the tiny preset: both caches timed through the server's queue,
their rows compared, the JSON written."""

from __future__ import annotations

import json
from pathlib import Path

from bench import serve_queue_speed


def test_serve_queue_speed_times_both_caches_and_compares_their_rows(tmp_path: Path) -> None:
    out = tmp_path / "queue.json"
    serve_queue_speed.main(["--size", "tiny", "--waves", "3,1", "--prompt-len", "12", "--budgets", "4,9",
                            "--reps", "1", "--json", str(out)])
    result = json.loads(out.read_text())
    assert set(result["tokens_per_s"]) == {"dynamic", "static"} and result["device"] == "cpu"
    assert all(v > 0 for v in result["tokens_per_s"].values()) and result["ratio_to_dynamic"] > 0
    assert result["rows_same_tokens"] == "4/4"  # float32, greedy: the static cache changes no token
    assert [len(s) for s in result["first_wave_s"].values()] == [2, 2]
