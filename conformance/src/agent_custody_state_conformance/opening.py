"""A refused open of a new file ledger must not remove what another process created there
meanwhile (``ledger.files.NewFiles``): ``refused_open_leaves_anothers_ledger``.

The open is refused late (a crypto-shred key store in a folder that does not exist), after the
backend opened; while it was under way (as when a key store waits on a busy lock, up to 30 s)
another process opened the same new ledger and committed three events. The refused open used to
take every file new beside the path for its own and delete them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.backend import EventBackend

_WRITER = """
import sys
from agent_custody_state import Ledger
with Ledger(sys.argv[1]) as ledger:
    for i in range(3):
        ledger.assert_fact(subject="s", predicate="p", value=i, space="x", actor="b")
"""


class _SlowHost:
    """The plugin host, except that another process opens the same ledger and commits three
    events while this process's open is under way."""

    def __init__(self) -> None:
        from agent_custody_state.ledger.host import default_host

        self._host = default_host()

    def open_backend(self, location: str, **options: Any) -> EventBackend:
        backend = self._host.open_backend(location, **options)
        subprocess.run([sys.executable, "-c", _WRITER, location], check=True, timeout=60)
        return backend

    def event_appended(self, ledger: Ledger, event: Any) -> None:
        pass


def refused_open_leaves_anothers_ledger(path: Path) -> None:
    """Open the new ledger ``path`` so that the open is refused after another process has
    committed events there; the other process's ledger must be left whole."""
    with pytest.raises(Exception, match="does not exist"):
        Ledger(
            path,
            host=_SlowHost(),  # type: ignore[arg-type]
            forget_mode="crypto-shred",
            key_store=str(path.parent / "missing" / "keys"),
        )
    assert path.exists(), sorted(p.name for p in path.parent.iterdir())
    with Ledger(path) as ledger:
        assert sorted(f.value for f in ledger.as_of(subject="s")) == [0, 1, 2]
