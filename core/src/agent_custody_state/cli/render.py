"""Human output: rich tables on standard output, and the ``--json`` printer.

rich is imported when a table is drawn, never before (``--help`` stays fast). On a terminal the
table fits the window; in a pipe or a file it is drawn without colour and wide enough that a row
stays one line for ``grep`` (``COLUMNS`` overrides the width). On a standard output that is not
UTF-8 (``textstreams``) lines are drawn in ASCII and a cut value ends in ``...``.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from agent_custody_state.cli.progress import is_terminal
from agent_custody_state.cli.textstreams import ascii_only, printable

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
    if len(text) <= limit:
        return text
    ellipsis = "..." if ascii_only() else "…"
    return text[: limit - len(ellipsis)] + ellipsis


class _Captured(io.StringIO):
    """A buffer that tells rich standard output's encoding: rich draws a table's lines in
    ASCII when that encoding is not UTF-8 (escaped box characters would fill the table)."""

    def __init__(self) -> None:
        super().__init__()
        self._encoding = getattr(sys.stdout, "encoding", None) or "utf-8"

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding


class _Out:
    """A rich console for standard output: the terminal's, or (in a pipe or a file) a buffer
    without colour whose lines are written without the trailing blanks rich pads cells with."""

    def __init__(self) -> None:
        from rich.console import Console

        self.captured = not is_terminal(sys.stdout)
        if self.captured:
            width = int(os.environ.get("COLUMNS") or PIPE_WIDTH)
            self.console = Console(
                file=_Captured(),
                width=width,
                highlight=False,
                no_color=True,
                force_terminal=False,
            )
        else:
            self.console = Console(highlight=False)

    def print(self, renderable: Any, **options: Any) -> None:
        self.console.print(renderable, **options)

    def close(self) -> None:
        if self.captured:
            text = self.console.file.getvalue()  # type: ignore[attr-defined]
            sys.stdout.write("".join(line.rstrip() + "\n" for line in text.splitlines()))


def print_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    title: str | None = None,
    caption: str | None = None,
    no_wrap: Sequence[str] = (),
) -> None:
    """One table on standard output; ``no_wrap`` names columns kept on one line (ids, times).

    A table that cannot fit the width without breaking words (a narrow terminal) is printed as
    records instead, one block per row (``psql``'s expanded display), so ids and times stay
    whole and copyable.
    """
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    rows = [[printable(cell) for cell in row] for row in rows]
    title, caption = (printable(text) if text else text for text in (title, caption))
    out = _Out()
    table = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, title_justify="left")
    for name in columns:
        table.add_column(name, no_wrap=name in no_wrap, overflow="fold")
    for row in rows:
        # Values come from the ledger: never let them be read as rich markup.
        table.add_row(*(escape(cell) for cell in row))
    if _narrowest(columns, rows, no_wrap) <= out.console.width:
        out.print(table)
    else:
        _records(out, columns, rows, title, caption)
    out.close()


def _narrowest(
    columns: Sequence[str], rows: Sequence[Sequence[str]], no_wrap: Sequence[str]
) -> int:
    """The width the table needs without breaking a word (or a ``no_wrap`` cell): each column
    its longest word or whole cell, one blank either side of it and one between columns."""
    from rich.cells import cell_len

    total = len(columns) + 1
    for index, name in enumerate(columns):
        cells = [name, *(row[index] for row in rows)]
        if name in no_wrap:
            widest = max(cell_len(cell) for cell in cells)
        else:
            widest = max((cell_len(word) for cell in cells for word in cell.split()), default=1)
        total += widest + 2
    return total


def _records(
    out: _Out,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    title: str | None,
    caption: str | None,
) -> None:
    width = max(len(name) for name in columns[1:]) if len(columns) > 1 else 0
    lines = [title, ""] if title else []
    for row in rows:
        lines.append(f"{columns[0]} {row[0]}")
        lines += [
            f"  {name:<{width}}  {cell}" for name, cell in zip(columns[1:], row[1:], strict=True)
        ]
        lines.append("")
    if caption:
        lines.append(caption)
    # Plain text, unwrapped: the terminal wraps a long value, an id or a time stays whole.
    out.print("\n".join(lines), markup=False, soft_wrap=True)


def print_fields(pairs: Iterable[tuple[str, str]], *, title: str | None = None) -> None:
    """A two-column ``field  value`` table (``show``)."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    out = _Out()
    title = printable(title) if title else title
    table = Table(title=title, box=box.SIMPLE, show_header=False, title_justify="left")
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    for name, value in pairs:
        table.add_row(name, escape(printable(value)))
    out.print(table)
    out.close()
