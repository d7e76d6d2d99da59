"""Standard output and error in any encoding: what they cannot encode is written as ``\\uXXXX``.

Python writes its standard streams in the locale's encoding, which is not always UTF-8 (a
``PYTHONIOENCODING=ascii`` set by a platform, a Latin-1 locale, ``PYTHONCOERCECLOCALE=0``, a
Windows console): a value such as ``café 日本`` then stopped every command that printed it with
a ``UnicodeEncodeError`` traceback. The command line's entry point (``cli.main``) sets, while
a command runs, an error handler on both streams that writes each character the encoding lacks
as a JSON escape: ``\\u00e9``, and a UTF-16 surrogate pair beyond U+FFFF. A character
outside the encoding can only stand inside a JSON string (JSON's own syntax is ASCII), so
``--json`` output stays valid JSON that reads back to the same value; a table or a message
shows the escape. The same holds for a lone surrogate (a path's non-UTF-8 bytes, which Python
decodes as ``\\udc80``-``\\udcff``) on a UTF-8 stream. Files the commands write are UTF-8
whatever the locale (each ``open`` names its encoding); only the terminal's text changes.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import sys
from collections.abc import Iterator

#: The name the error handler is registered under (``codecs.register_error``).
JSON_ESCAPE = "agent_custody_state.json_escape"


def json_escape(error: UnicodeError) -> tuple[str, int]:
    """``codecs`` error handler: the characters an encoding lacks as ``\\uXXXX`` escapes."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    return "".join(_escape(char) for char in error.object[error.start : error.end]), error.end


def _escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


codecs.register_error(JSON_ESCAPE, json_escape)


@contextlib.contextmanager
def escaped_streams() -> Iterator[None]:
    """Set ``json_escape`` on standard output and error while the block runs, when they are
    text files (a stream a caller replaced with another kind, ``ClosedStdout`` or an
    ``io.StringIO``, is left alone); each gets its own error handler back after, so a program
    that calls ``cli.main`` keeps its streams as they were."""
    changed: list[tuple[io.TextIOWrapper, str | None]] = []
    for stream in dict.fromkeys((sys.stdout, sys.stderr)):  # once when both are one stream
        if isinstance(stream, io.TextIOWrapper) and stream.errors != JSON_ESCAPE:
            changed.append((stream, stream.errors))
            stream.reconfigure(errors=JSON_ESCAPE)
    try:
        yield
    finally:
        for stream, errors in reversed(changed):
            # A stream closed or broken meanwhile (a closed pipe) has nothing left to write.
            with contextlib.suppress(OSError, ValueError):
                stream.reconfigure(errors=errors)


def printable(text: str) -> str:
    """``text`` as standard output will show it: what its encoding lacks already escaped, so a
    table is laid out with the escape's width (not the character's) and its columns align."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    return text.encode(encoding, JSON_ESCAPE).decode(encoding)


def ascii_only() -> bool:
    """Whether standard output cannot encode all of Unicode (tables then draw ASCII lines)."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    return not codecs.lookup(encoding).name.startswith("utf")
