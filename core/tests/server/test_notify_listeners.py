"""The server's append listener on the ledger's host: one per live server, never lost.

A listener was once named by ``id()`` of its notifier: a server left unclosed kept its listener
on the host under that name, a later server given the same ``id()`` was refused the name, the
refusal was only recorded, and that server's subscribers heard nothing (a test in the full
suite failed so, once in many runs). Listeners are numbered now, leave the host with a server
that is collected, and a refused listener fails the server's creation.
"""

from __future__ import annotations

import gc
import itertools
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.host import default_host
from agent_custody_state.server import notify
from agent_custody_state.server.app import create_memory_server


def listeners(host: Any) -> list[str]:
    return [
        name
        for name, _plugin in host.pm.list_name_plugin()
        if name.startswith("memory-server-notify-")
    ]


def host_of(ledger: Ledger) -> Any:
    return ledger._host or default_host()


def test_a_server_never_closed_leaves_no_listener_behind(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        host = host_of(ledger)
        before = set(listeners(host))  # servers of earlier tests may still await collection
        server = create_memory_server(ledger, require_gateway=False)
        mine = set(listeners(host)) - before
        assert len(mine) == 1
        del server
        gc.collect()
        assert not mine & set(listeners(host))


def test_a_closed_server_leaves_no_listener_and_two_servers_have_two(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        host = host_of(ledger)
        before = set(listeners(host))
        one = create_memory_server(ledger, require_gateway=False)
        two = create_memory_server(ledger, require_gateway=False)
        mine = set(listeners(host)) - before
        assert len(mine) == 2
        one.close()
        two.close()
        assert not mine & set(listeners(host))


def test_a_listener_the_host_refuses_fails_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        host = host_of(ledger)
        taken = object()
        host.pm.register(taken, name="memory-server-notify-1")
        try:
            monkeypatch.setattr(notify, "_NUMBERS", itertools.count(1))
            with pytest.raises(RuntimeError, match="refused the server's append listener"):
                create_memory_server(ledger, require_gateway=False)
        finally:  # nothing of this test's refusal left for later tests' error messages
            host.pm.unregister(taken)
            host.plugins.pop("memory-server-notify-1", None)
            host.errors[:] = [e for e in host.errors if "memory-server-notify-1" not in e]
