"""The result cache: content keys, atomic files on disk, and the bounded in-process memo."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.cuda.nvrtc import cache


@pytest.fixture(autouse=True)
def _fresh_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "_memo", type(cache._memo)())


def test_a_key_names_its_parts_in_order() -> None:
    key = cache.content_key("nvrtc", "13.0", ["-std=c++17"], "src")
    assert key == cache.content_key("nvrtc", "13.0", ["-std=c++17"], "src") and len(key) == 64
    assert key != cache.content_key("nvrtc", "13.0", ["-std=c++20"], "src")
    assert key != cache.content_key("src", ["-std=c++17"], "13.0", "nvrtc")


def test_results_live_on_disk_by_key_and_a_copy_is_returned(tmp_path: Path) -> None:
    key = cache.content_key("k")
    assert cache.get(tmp_path, key) is None
    cache.put(tmp_path, key, {"ok": True, "log": ""})
    assert cache.result_path(tmp_path, key) == tmp_path / "results" / key[:2] / f"{key}.json"
    assert cache.result_path(tmp_path, key).is_file()
    got = cache.get(tmp_path, key)
    assert got == {"ok": True, "log": ""}
    got["ok"] = False  # the caller's copy
    assert cache.get(tmp_path, key) == {"ok": True, "log": ""}


def test_without_a_folder_the_memo_alone_keeps_results(tmp_path: Path) -> None:
    key = cache.content_key("memo only")
    cache.put(None, key, {"ok": False})
    assert cache.get(None, key) == {"ok": False}
    assert cache.get(tmp_path, key) is None  # another folder is another cache


def test_an_unreadable_file_is_a_miss(tmp_path: Path) -> None:
    key = cache.content_key("torn")
    path = cache.result_path(tmp_path, key)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert cache.get(tmp_path, key) is None
    path.write_text("[1, 2]")
    assert cache.get(tmp_path, key) is None


def test_the_memo_keeps_the_most_recent_results(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "MEMO_SIZE", 2)
    for name in ("a", "b"):
        cache.put(None, name, {"n": name})
    assert cache.get(None, "a") == {"n": "a"}  # now the most recent
    cache.put(None, "c", {"n": "c"})
    assert [cache.get(None, k) for k in ("a", "b", "c")] == [{"n": "a"}, None, {"n": "c"}]
