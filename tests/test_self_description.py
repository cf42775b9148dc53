"""The product speaks of itself only: no build history, issue numbers, build machines or outside paths.

Every tracked text file and every file name of the repository is checked (process and profiler
sessions are fine: the patterns name what is not).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = [
    re.compile(r"\bsession[-_ ]?\d", re.I),             # "session 5", "session-4 figures"
    re.compile(r"\b(this|last|next|earlier|previous) session\b", re.I),
    re.compile(r"\bissues? ?#?\d+", re.I),               # "issue 12", "issue #3"
    re.compile(r"\bthe (\w+ )?issue\b", re.I),            # "the serving issue", "the issue quotes"
    re.compile(r"\bnot filed\b", re.I),
    re.compile(r"\.\./shared|/work/(shared|main)|\.library", re.I),
    re.compile(r"\blent\b|\blends?\b|\bthe box\b", re.I),
]
SELF = Path(__file__).resolve()


def tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [ROOT / line for line in out.splitlines() if line and (ROOT / line).is_file()]


def findings(path: Path, text: str) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{n}: {m.group(0)!r}" for n, line in enumerate(text.splitlines(), 1)
            for pattern in FORBIDDEN if (m := pattern.search(line))]


def test_no_file_speaks_of_how_the_product_was_built() -> None:
    found = []
    for path in tracked_files():
        if path.resolve() == SELF or path.suffix in {".png", ".parquet", ".db"}:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        found += findings(path, text)
    assert found == []


def test_no_file_name_names_a_session() -> None:
    assert [str(p.relative_to(ROOT)) for p in tracked_files() if "session" in p.name.lower()] == []


def test_the_patterns_catch_what_they_are_for() -> None:
    bad = ["figures of session 5", "the serving issue (not filed yet)", "see issue 12", "../shared/design/x.md",
           "on a lent H200 box", "the issue quotes 4.3 s"]
    ok = ["a profiler session starts", "each process session", "requests.Session()", "it issues a launch"]
    assert all(findings(ROOT / "x", s) for s in bad)
    assert not any(findings(ROOT / "x", s) for s in ok)
