"""The documentation's links: every relative link in README.md and docs/*.md names a file
or folder of the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)  # not in code blocks
    return [m for m in LINK.findall(text) if not re.match(r"[a-z]+:|#", m)]


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_relative_links_resolve():
    bad = []
    for page in _pages():
        for link in _links(page):
            target = (page.parent / link.split("#")[0]).resolve()
            if not target.exists():
                bad.append(f"{page.relative_to(ROOT)} -> {link}")
    assert not bad, bad

