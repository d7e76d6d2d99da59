"""What ``review --out DIR`` wrote, so a later run removes its own stale pages and nothing else.

A second run after receipts were pruned left the earlier run's pages of those receipts in the
folder (and with them the values those receipts held). The index a run writes is its manifest:
it carries ``MARK`` (an HTML comment, invisible on the page) and links ``r/<id>.html`` for every
receipt page it wrote, each with ``r/<id>.json`` beside it. A run removes the pages the marked
index it replaces links to and that it no longer writes, before writing its own index (a run cut
short leaves the old index naming them, so the next run still removes them). Only names of
that shape are ever removed. An index without the mark (an earlier version's, or anyone
else's) names nothing, and files the review did not write are never touched. The folder keeps
exactly ``index.html`` and ``r/`` (no manifest file of its own).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

MARK = (
    "<!-- written by agent-custody-memory review --out: every r/<id>.html page this index "
    "links to, and r/<id>.json beside it, is its own; the next run removes those it no longer "
    "writes -->"
)
_DOCTYPE = "<!doctype html>\n"
_LINK = re.compile(r'href="r/([0-9a-f-]{36})\.html"')
_MAX_BYTES = 256 * 1024 * 1024


def marked(index_html: str) -> str:
    """The index as ``review --out`` writes it: with ``MARK`` after the doctype."""
    return index_html.replace(_DOCTYPE, f"{_DOCTYPE}{MARK}\n", 1)


def pages(ids: Iterable[str]) -> set[str]:
    """The files of these receipts' pages, relative to the folder."""
    return {f"r/{rid}.{ext}" for rid in ids for ext in ("html", "json")}


def earlier_pages(folder: Path) -> set[str]:
    """The pages the marked index in ``folder`` says an earlier run wrote; empty when there is
    no index, or it is not one of ours."""
    index = folder / "index.html"
    try:
        info = os.lstat(index)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_BYTES:
            return set()
        html = index.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    if MARK not in html:
        return set()
    return pages(_LINK.findall(html))


def check_apart(folder: Path, receipts_dir: str | os.PathLike[str]) -> None:
    """``OSError`` (the command's error, exit 1) when the pages folder ``folder/r`` is the
    receipts directory itself (``review --receipts DIR/r --out DIR``): each ``r/<id>.json``
    would replace the gateway's signed receipt with a copy whose erased values are hidden (its
    signatures no longer verify), and the cleanup would remove receipts a run does not list."""
    try:
        same = os.path.samefile(folder / "r", receipts_dir)
    except OSError:
        return  # either is missing: they cannot be one folder
    if same:
        raise OSError(
            f"--out {folder}: its pages folder {folder / 'r'} is the receipts directory, whose "
            "receipts the pages would replace; name another folder"
        )


def remove(folder: Path, names: Iterable[str]) -> None:
    """Unlink each page (a link itself, never what it names); a folder, or a file already gone,
    is left as it is."""
    for name in sorted(names):
        path = folder / name
        with contextlib.suppress(OSError):
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                path.unlink()


__all__ = ["MARK", "check_apart", "earlier_pages", "marked", "pages", "remove"]
