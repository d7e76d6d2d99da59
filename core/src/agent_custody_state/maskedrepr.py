"""Settings models whose ``repr`` and ``str`` show no password.

A configuration gets printed: in a debugger, a test's failure, a traceback's locals, a
program's own ``log.debug("config %r", config)``. Its values name environment variables, never
secrets, except where a setting is a location given as a URL or connection string: ``ledger =
"postgresql://user:PASSWORD@db/app"`` (``AGENT_CUSTODY_LEDGER`` is the usual way to pass one), a
key store or outbox at such a URL, a store's ``host = "https://user:PASSWORD@proxy"``, a
``password=`` parameter. ``MaskedRepr`` shows every setting through ``shown``: the password of
each URL, each ``password=`` parameter and each registered secret (``stores.base.redact``)
replaced by ``***``. The values themselves are untouched: only their display changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

#: A ``password=`` parameter's value: bare, or quoted (``password='a b'``, as libpq takes a
#: password with a space; double quotes; ``\'`` in the ``repr`` of a text holding both quotes).
_PASSWORD_PARAM = re.compile(
    r"""(password\s*=\s*)(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|\\'.*?\\'|[^\s&'"]+)""",
    re.IGNORECASE,
)


def shown(text: str) -> str:
    """``text`` without URL passwords, ``password=`` parameters or registered secrets."""
    # Imported here: the configuration is loaded without the stores' modules (start-up time).
    from agent_custody_state.stores.base import redact

    return _PASSWORD_PARAM.sub(r"\1***", redact(text))


class _Shown:
    """A value's ``repr``, already masked, as pydantic's ``repr`` and ``str`` print it."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


class MaskedRepr:
    """A pydantic model mixin (first among the bases): ``repr``, ``str`` and rich/devtools
    displays show each field, extra keys included, through ``shown``."""

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        args: Iterator[tuple[str | None, Any]] = super().__repr_args__()  # type: ignore[misc]
        for name, value in args:
            yield name, _Shown(shown(repr(value)))
