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


def test_a_static_cache_that_fails_is_reported_and_the_rest_timed(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    real = decode_speed.decode

    def no_static(model, ids, variant, new_tokens):  # type: ignore[no-untyped-def]
        if variant == "static":
            raise ValueError("this model's cache cannot be static")
        return real(model, ids, variant, new_tokens)

    monkeypatch.setattr(decode_speed, "decode", no_static)
    out = tmp_path / "decode.json"
    decode_speed.main(["--size", "tiny", "--batch", "1", "--prompt-len", "8", "--new-tokens", "4", "--reps", "1",
                       "--json", str(out)])
    result = json.loads(out.read_text())
    assert set(result["ms_per_token"]) == {"dynamic", "dynamic+loop_stop"}
    assert "cannot be static" in result["static_error"] and result["static_same_tokens"] is False
    assert result["static_first_call_s"] is None
