"""Text shown on one line: control characters escaped as JSON escapes them.

A value from a receipt, the ledger, a caller or a vendor may hold a newline or an escape
sequence; shown raw in a text output or a log line it starts a line of its own (a forged answer,
a forged log record, a forged row of a review page) or drives the operator's terminal. Used by
the operator's extras (``extras.jsview``) and the server's text log (``cli.logs``).
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def shown(value: str) -> str:
    """A string as a text output shows it: control characters escaped as JSON escapes them
    (``\\n``, ``\\u001b``), so a value from a receipt or the ledger cannot start a line of its
    own (a forged answer, or a forged row of a review page) or drive the terminal."""
    return _CONTROL.sub(lambda m: _SHORT.get(m[0], f"\\u{ord(m[0]):04x}"), value)
