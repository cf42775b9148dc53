"""bench/decode_speed.py on the CPU with the tiny preset: every variant timed, the static cache's greedy tokens
the dynamic cache's, the JSON written."""

from __future__ import annotations

import json
from pathlib import Path

from bench import decode_speed


def test_decode_speed_times_every_variant_and_checks_the_static_tokens(tmp_path: Path) -> None:
    out = tmp_path / "decode.json"
    decode_speed.main(["--size", "tiny", "--batch", "2", "--prompt-len", "16", "--new-tokens", "8", "--reps", "1",
                       "--json", str(out)])
    result = json.loads(out.read_text())
    assert set(result["ms_per_token"]) == set(decode_speed.VARIANTS)
    assert all(ms > 0 for ms in result["ms_per_token"].values())
    assert result["ratio_to_dynamic"]["dynamic"] == 1.0
    assert result["static_same_tokens"] is True and result["device"] == "cpu"
