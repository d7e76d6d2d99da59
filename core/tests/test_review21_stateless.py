"""``stateless=`` of the HTTP server takes a bool only (twenty-first review).

``create_memory_http_server(stateless="no")`` (and ``serve_memory_http``, ``build_http_app``)
read the flag for its truth: "no" served statelessly, without subscriptions. It is now refused
with a ``LedgerError`` naming the parameter before anything is built or bound, as the other
boolean keywords of the API are (``test_review21_args``, whose signature guard this extends to
``server.http``).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_review21_args import NOT_BOOLS, _bool_keywords, _files

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.server import http
from agent_custody_state.server.app import create_memory_server

#: Every boolean keyword of ``server.http``'s public API, with a call giving it ``value``.
CALLS: dict[str, Callable[[Ledger, Any], Any]] = {
    "create_memory_http_server.stateless": lambda led, v: http.create_memory_http_server(
        led, port=0, stateless=v
    ),
    "serve_memory_http.stateless": lambda led, v: http.serve_memory_http(led, port=0, stateless=v),
    "build_http_app.stateless": lambda led, v: http.build_http_app(
        create_memory_server(led), tokens=[], stateless=v
    ),
}
#: Taken through ``**options`` (passed on to ``create_memory_http_server``), not by signature.
FORWARDED = {"serve_memory_http.stateless"}


def _refused(call: Callable[[], Any]) -> LedgerError:
    """The ``LedgerError`` ``call`` raises; a server it built instead is closed, and fails."""
    try:
        made = call()
    except LedgerError as exc:
        return exc
    if isinstance(made, http.MemoryHttpServer):
        made.close()
    pytest.fail(f"accepted: built {made!r}")


@pytest.mark.parametrize("value", NOT_BOOLS, ids=repr)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_stateless_refuses_what_is_not_a_bool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: Any
) -> None:
    """Refused with a ``LedgerError`` naming ``stateless``, before the memory server or the
    session manager is built or a socket bound; the ledger's folder is byte-identical."""
    built: list[str] = []

    def spy(real: Callable[..., Any], what: str) -> Callable[..., Any]:
        def record(*args: Any, **kwargs: Any) -> Any:
            built.append(what)
            return real(*args, **kwargs)

        return record

    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a")
        before = _files(tmp_path)
        for what in ("create_memory_server", "StreamableHTTPSessionManager", "listen"):
            monkeypatch.setattr(http, what, spy(getattr(http, what), what))
        error = _refused(lambda: CALLS[name](ledger, value))
        assert _files(tmp_path) == before
    assert error.field == "stateless", str(error)
    assert "stateless" in str(error)
    assert built == []
    assert not [t for t in threading.enumerate() if t.name == "memory-http"]


@pytest.mark.parametrize("stateless", [True, False])
def test_a_bool_is_taken(tmp_path: Path, stateless: bool) -> None:
    """True and False build the server as before (the SDK's session manager as asked)."""
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        server = http.create_memory_http_server(ledger, port=0, stateless=stateless)
        assert isinstance(server, http.MemoryHttpServer)
        assert server.app.state.mcp_sessions.stateless is stateless


def test_every_boolean_keyword_of_the_http_api_is_held_here() -> None:
    """A boolean keyword added to ``server.http``'s API without its check fails here first."""
    found: set[str] = set()
    for name in http.__all__:
        member = getattr(http, name)
        found |= _bool_keywords(name, member.__init__ if inspect.isclass(member) else member)
    assert found | FORWARDED == set(CALLS)
