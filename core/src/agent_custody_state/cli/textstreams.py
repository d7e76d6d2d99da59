"""Standard output and error in any encoding: what they cannot encode is written as ``\\uXXXX``.

Python writes its standard streams in the locale's encoding, which is not always UTF-8 (a
``PYTHONIOENCODING=ascii`` set by a platform, a Latin-1 locale, ``PYTHONCOERCECLOCALE=0``, a
Windows console): a value such as ``café 日本`` then stopped every command that printed it with
a ``UnicodeEncodeError`` traceback. The command line's entry point (``cli.main``) sets, once
for every command, an error handler on both streams that writes each character the encoding
lacks as a JSON escape: ``\\u00e9``, and a UTF-16 surrogate pair beyond U+FFFF. A character
outside the encoding can only stand inside a JSON string (JSON's own syntax is ASCII), so
``--json`` output stays valid JSON that reads back to the same value; a table or a message
shows the escape. The same holds for a lone surrogate (a path's non-UTF-8 bytes, which Python
decodes as ``\\udc80``-``\\udcff``) on a UTF-8 stream. Files the commands write are UTF-8
whatever the locale (each ``open`` names its encoding); only the terminal's text changes.
"""

from __future__ import annotations

import codecs
import io
import sys

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


def escape_unencodable() -> None:
    """Set ``json_escape`` on standard output and error when they are text files (a stream a
    caller replaced with another kind, ``ClosedStdout`` or an ``io.StringIO``, is left alone)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors=JSON_ESCAPE)


def printable(text: str) -> str:
    """``text`` as standard output will show it: what its encoding lacks already escaped, so a
    table is laid out with the escape's width (not the character's) and its columns align."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    return text.encode(encoding, JSON_ESCAPE).decode(encoding)


def ascii_only() -> bool:
    """Whether standard output cannot encode all of Unicode (tables then draw ASCII lines)."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    return not codecs.lookup(encoding).name.startswith("utf")
