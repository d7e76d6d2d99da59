"""Every link in the user documentation resolves: its file exists, its anchor is a heading there.

The pages are ``README.md``, ``docs/*.md`` (the records too: their links are followed by readers
as well), ``bench/README.md``, each plugin's README and the examples' READMEs. A link is checked
when it is relative (``cli.md#serve``, ``#using-it``, ``plugin-template/``) or points into this
repository on GitHub (``https://github.com/agent-custody/agent-custody-state/blob/main/docs/...``,
as the READMEs shown on the package index must spell it). An anchor must be the GitHub slug of a
heading in the target page (lower case, punctuation dropped, spaces to hyphens, ``-1`` for the
second heading of the same text) or an explicit ``<a id="...">``. Fenced code and inline code are
not links. Every page of ``docs/`` is also reachable from ``docs/index.md``, so a newcomer finds it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BASE_URL = "https://github.com/agent-custody/agent-custody-state"
PAGES = sorted(
    {
        ROOT / "README.md",
        ROOT / "bench" / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *ROOT.glob("plugins/*/README.md"),
        *ROOT.glob("examples/**/README*.md"),
    }
)
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
EXPLICIT = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
#: ``[text](target)`` (not an image's ``![alt](src)``) and ``[label]: target`` definitions.
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
OWN = re.compile(rf"^{re.escape(BASE_URL)}/(?:blob|tree)/main/(.*)$")


def prose_lines(text: str) -> list[str]:
    """The page's lines outside fenced code blocks, inline code spans removed."""
    lines: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        opener = FENCE.match(line)
        if fence is None and opener:
            fence = opener.group(1)[0] * len(opener.group(1))
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None:
            lines.append(INLINE_CODE.sub("", line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a link may name in ``page``."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fence: str | None = None
    for line in page.read_text(encoding="utf-8").splitlines():
        opener = FENCE.match(line)
        if fence is None and opener:
            fence = opener.group(1)[0] * len(opener.group(1))
            continue
        if fence is not None:
            fence = None if line.strip().startswith(fence) else fence
            continue
        found.update(EXPLICIT.findall(line))
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2).replace("`", ""))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def targets(page: Path) -> list[str]:
    """The link targets written in ``page``'s prose."""
    found: list[str] = []
    for line in prose_lines(page.read_text(encoding="utf-8")):
        found.extend(LINK.findall(line))
        definition = DEFINITION.match(line)
        if definition:
            found.append(definition.group(1))
    return found


def broken(page: Path) -> list[str]:
    """Why each of ``page``'s links to this repository does not resolve (empty: all do)."""
    problems: list[str] = []
    for target in targets(page):
        own = OWN.match(target)
        if own:
            path, _, anchor = own.group(1).partition("#")
            dest = ROOT / path
        elif re.match(r"^[a-zA-Z][\w+.-]*:", target):
            continue  # another site, or mailto:
        else:
            path, _, anchor = target.partition("#")
            dest = page.parent / path if path else page
        if not dest.resolve().exists():
            problems.append(f"{target}: no file {path}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{target}: no heading with anchor #{anchor} in {dest.name}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page: Path) -> None:
    assert broken(page) == [], f"{page.relative_to(ROOT)}: fix these links"


def test_every_docs_page_is_in_the_index() -> None:
    index = ROOT / "docs" / "index.md"
    linked = {(index.parent / t.partition("#")[0]).resolve() for t in targets(index)}
    missing = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p != index and p not in linked)
    assert missing == [], f"docs/index.md: add a line for {missing}"


def test_a_broken_link_and_a_missing_anchor_are_found(tmp_path: Path) -> None:
    """The checker itself: a missing file, a missing anchor, a duplicate heading's ``-1``."""
    (tmp_path / "other.md").write_text("# Title\n\n## The `serve` command (HTTP)\n\n## Title\n")
    page = tmp_path / "page.md"
    page.write_text(
        "See [a](other.md#the-serve-command-http), [b](other.md#title-1), [c](#here).\n"
        '<a id="here"></a>\n'
        "Broken: [d](gone.md), [e](other.md#nowhere).\n"
        "```md\n[not a link](fenced.md)\n```\n"
        "`[not a link](inline.md)`\n"
    )
    problems = [p.replace(str(tmp_path), "") for p in broken(page)]
    assert len(problems) == 2, problems
    assert problems[0].startswith("gone.md: no file")
    assert problems[1] == "other.md#nowhere: no heading with anchor #nowhere in other.md"
