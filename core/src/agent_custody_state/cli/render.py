"""Human output: rich tables on standard output, and the ``--json`` printer.

rich is imported when a table is drawn, never before (``--help`` stays fast). On a terminal the
table fits the window; in a pipe or a file it is drawn without colour and wide enough that a row
stays one line for ``grep`` (``COLUMNS`` overrides the width).
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from agent_custody_state.cli.progress import is_terminal

#: Width of a table written to a pipe or a file (a terminal uses its own).
PIPE_WIDTH = 200


def print_json(data: Any) -> None:
    """``--json`` output: one line of wire JSON, written exactly as the memory tools write it
    (``jq`` makes it pretty)."""
    from agent_custody_state.canonical import js_json

    print(js_json(data))


def value_text(value: Any, limit: int = 60) -> str:
    """A value as compact JSON, cut to ``limit`` characters with an ellipsis."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _emit(renderable: Any) -> None:
    """Print on a terminal as rich draws it; elsewhere without colour and without the
    trailing blanks rich pads its cells with (a pipe or a file gets plain lines)."""
    from rich.console import Console

    if is_terminal(sys.stdout):
        Console(highlight=False).print(renderable)
        return
    width = int(os.environ.get("COLUMNS") or PIPE_WIDTH)
    console = Console(
        file=io.StringIO(), width=width, highlight=False, no_color=True, force_terminal=False
    )
    console.print(renderable)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    sys.stdout.write("".join(line.rstrip() + "\n" for line in text.splitlines()))


def print_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    title: str | None = None,
    caption: str | None = None,
    no_wrap: Sequence[str] = (),
) -> None:
    """One table on standard output; ``no_wrap`` names columns kept on one line (ids, times)."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, title_justify="left")
    for name in columns:
        table.add_column(name, no_wrap=name in no_wrap, overflow="fold")
    for row in rows:
        # Values come from the ledger: never let them be read as rich markup.
        table.add_row(*(escape(cell) for cell in row))
    _emit(table)


def print_fields(pairs: Iterable[tuple[str, str]], *, title: str | None = None) -> None:
    """A two-column ``field  value`` table (``show``)."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE, show_header=False, title_justify="left")
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    for name, value in pairs:
        table.add_row(name, escape(value))
    _emit(table)
