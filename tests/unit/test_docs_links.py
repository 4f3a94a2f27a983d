"""README.md is a front page (at most 150 lines, naming the test command), and every relative link
in README.md, CONTRIBUTING.md and docs/ leads somewhere: to a file that exists and, with a
#fragment into a Markdown page, to a heading of that page (the anchor mkdocs makes of it). The
strict mkdocs build (`make docs`) checks links between pages of the site; this also covers
README.md and CONTRIBUTING.md, which GitHub shows and the site does not hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^ *(```|~~~)")
CODE_SPAN = re.compile(r"(`+).+?\1")


def prose(text: str, spans: bool = False) -> str:
    """The text outside code blocks, and outside code spans unless `spans` (a link-like string in
    code is no link; a heading's code span is part of its anchor)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            out.append(line if spans else CODE_SPAN.sub("", line))
    return "\n".join(out)


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension (mkdocs) gives a heading."""
    text = re.sub(r"[^\w\s-]", "", re.sub(r"<[^>]+>", "", heading)).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    return {
        slug(m.group(1))
        for m in re.finditer(r"^#{1,6} +(.+?) *#*$", prose(page.read_text(), spans=True), re.M)
    }


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page.read_text())) if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I)]


def test_slug_is_mkdocs_anchor():
    assert slug("MySQLClusterPrimaryDown") == "mysqlclusterprimarydown"
    assert (
        slug("Copy streams: who may read a database's bytes") == "copy-streams-who-may-read-a-databases-bytes"
    )
    assert slug("Switchover: asking once for another primary") == "switchover-asking-once-for-another-primary"


def test_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text()
    lines = text.count("\n")
    assert lines <= 150, f"README.md has {lines} lines: keep it a front page, move the rest to docs/"
    assert "make test" in text, "README.md must name the test command CI runs (make test)"
    assert "make demo" in text
    for page in ("docs/install.md", "docs/quickstart.md", "CONTRIBUTING.md"):
        assert f"]({page}" in text, f"README.md links no {page}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_somewhere(page: Path):
    broken = []
    for target in relative_links(page):
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT) if ROOT in dest.parents else dest}")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target}: {dest.name} has no heading with the anchor #{fragment}")
    assert not broken, f"{page.relative_to(ROOT)}: fix or remove these links:\n" + "\n".join(broken)
