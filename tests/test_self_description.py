"""The product speaks of itself only: not of how and where it was built, nor of paths outside it.

Every tracked text file and every file name of the repository is checked. The words are put
together from parts here, so that this file does not contain what it looks for; process and
profiler runs named with the same word are fine: the patterns name only what is not.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SESSION, ISSUE, SHARED, LOAN_WORD = "sess" + "ion", "iss" + "ue", "sha" + "red", "le" + "nt"
FORBIDDEN = [
    re.compile(rf"\b{SESSION}[-_ ]?\d", re.I),  # a numbered build run
    re.compile(rf"\b(this|last|next|earlier|previous) {SESSION}\b", re.I),
    re.compile(rf"\b{ISSUE}s? ?#?\d+", re.I),  # a numbered tracker entry
    re.compile(rf"\bthe (\w+ )?{ISSUE}\b", re.I),
    re.compile(r"\bnot fil" + r"ed\b", re.I),
    re.compile(rf"\.\./{SHARED}|/work/({SHARED}|main)|\.libr" + "ary", re.I),
    re.compile(rf"\b{LOAN_WORD}\b|\ble{'nd'}s?\b|\bthe b{'ox'}\b", re.I),
]


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
        if path.suffix in {".png", ".parquet", ".db"}:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        found += findings(path, text)
    assert found == []


def test_no_file_name_names_a_build_run() -> None:
    assert [str(p.relative_to(ROOT)) for p in tracked_files() if SESSION in p.name.lower()] == []


def test_the_patterns_catch_what_they_are_for() -> None:
    bad = [f"figures of {SESSION} 5", f"the serving {ISSUE} (not fil" + "ed yet)", f"see {ISSUE} 12",
           f"../{SHARED}/design/x.md", f"on a {LOAN_WORD} H200 b" + "ox", f"the {ISSUE} quotes 4.3 s"]
    ok = [f"a profiler {SESSION} starts", f"each process {SESSION}", "requests.Session()", f"it {ISSUE}s a launch"]
    assert all(findings(ROOT / "x", s) for s in bad)
    assert not any(findings(ROOT / "x", s) for s in ok)
