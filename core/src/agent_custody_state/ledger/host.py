"""What a ledger needs from the layers above it, without importing them.

A ``Ledger("ledger.sqlite")`` must find the SQLite backend among the installed plugins, and every
appended event is announced to plugins (the ``event_appended`` hook). Both live in the plugin
manager, which sits above the ledger. Rather than the ledger importing it, the manager installs
itself here as the default host when ``agent_custody_state.plugins`` is imported (which importing
``agent_custody_state`` does), and a caller may pass its own host to ``Ledger(..., host=...)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agent_custody_state.ledger.backend import EventBackend
    from agent_custody_state.ledger.ledger import Ledger
    from agent_custody_state.ledger.model import Event


class LedgerHost(Protocol):
    """Opens backends by location and hears about appended events."""

    def open_backend(self, location: str, **options: Any) -> EventBackend: ...

    def event_appended(self, ledger: Ledger, event: Event) -> None: ...

    # A host may also offer ``listens() -> bool``: False when nothing hears ``event_appended``,
    # so the ledger skips the call per event (the plugin manager does; ``Ledger._appended``).


_default: Callable[[], LedgerHost] | None = None


def set_default_host(provider: Callable[[], LedgerHost] | None) -> None:
    """Install the function that returns the default host (the plugin manager does this)."""
    global _default
    _default = provider


def default_host() -> LedgerHost:
    if _default is None:
        # Importing the package installs the plugin manager; a bare ``ledger`` import does not.
        raise RuntimeError(
            "no plugin host: import agent_custody_state (or pass host=) before opening a ledger "
            "by location"
        )
    return _default()
