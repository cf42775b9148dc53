"""Every relative link in the README and the docs resolves: the file exists, and an `#anchor` names
one of its headings (GitHub's slugs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "DEVELOPERS.md", ROOT / "bench" / "README.md",
                *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"```.*?```", re.S)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"(?m)^#+\s+(.*)$", text)}


def broken(page: Path) -> list[str]:
    out = []
    for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            out.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            out.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    return out


def test_the_pages_exist() -> None:
    assert len(PAGES) >= 10 and all(p.is_file() for p in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken(page) == []


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    (tmp_path / "there.md").write_text("# A heading\n")
    page.write_text("[ok](there.md#a-heading) [gone](missing.md) [bad](there.md#nope) [web](https://x.y)\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert broken(page) == ["p.md: missing.md (no such file)", "p.md: there.md#nope (no such heading)"]
    finally:
        ROOT = saved


def test_the_readme_reads_in_five_minutes() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250
