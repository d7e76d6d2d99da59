"""Boolean keywords of the public Python API take bools only (twenty-first review).

``import_events(check_chain=0)`` skipped the chain check and ``check_chain="no"`` did not;
``create_memory_server(require_gateway="")`` admitted direct calls (``--allow-direct``);
``value_digest(keep_digest="no")`` kept the digest; ``subscriptions=`` was read for its truth
too. Each is now refused with a ``LedgerError`` naming the parameter
before anything is written, as ``forget``'s ``keep_digest`` and ``certificate`` already were
(those are held here too, with every other boolean keyword of the API, by signature).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger, LedgerError, create_memory_server, value_digest
from agent_custody_state.server import app

NOT_BOOLS = ["no", "", 0, 2]
LATER = "2100-01-01T00:00:00Z"


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _fact(ledger: Ledger) -> str:
    return ledger.assert_fact(subject="s", predicate="p", value=1, space="org", actor="a").fact_id


#: Every boolean keyword of the public API, with a call giving it ``value`` (on a ledger with
#: one fact, whose id is passed).
CALLS: dict[str, Callable[[Ledger, str, Any], Any]] = {
    "Ledger.chain": lambda led, _id, v: Ledger(led.backend.location + ".x", chain=v),
    "Ledger.read_only": lambda led, _id, v: Ledger(led.backend.location + ".x", read_only=v),
    "forget.keep_digest": lambda led, i, v: led.forget(
        fact_id=i, actor="a", reason="r", keep_digest=v
    ),
    "forget.certificate": lambda led, i, v: led.forget(
        fact_id=i, actor="a", reason="r", certificate=v
    ),
    "sweep.keep_digest": lambda led, _id, v: led.sweep(
        before=LATER, actor="a", reason="r", keep_digest=v
    ),
    "sweep.certificates": lambda led, _id, v: led.sweep(
        before=LATER, actor="a", reason="r", certificates=v
    ),
    "certifying.certificate": lambda led, _id, v: led.certifying(v),
    "check_sweep.keep_digest": lambda led, _id, v: led.check_sweep(LATER, "a", "r", keep_digest=v),
    "import_events.check_chain": lambda led, _id, v: Ledger(
        led.backend.location + ".empty"
    ).import_events(list(led.backend.iter_events()), check_chain=v),
    "value_digest.keep_digest": lambda _led, _id, v: value_digest(
        "x", forget_key=None, keep_digest=v
    ),
    "create_memory_server.require_gateway": lambda led, _id, v: create_memory_server(
        led, require_gateway=v
    ),
    "create_memory_server.subscriptions": lambda led, _id, v: create_memory_server(
        led, subscriptions=v
    ),
}


@pytest.mark.parametrize("value", NOT_BOOLS, ids=repr)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_boolean_keyword_refuses_what_is_not_a_bool(
    tmp_path: Path, name: str, value: Any
) -> None:
    """Refused with a ``LedgerError`` naming the parameter; the ledger's folder (the ledger,
    an empty one an import would fill) is byte-identical after."""
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        fact_id = _fact(ledger)
        Ledger(tmp_path / "ledger.jsonl.empty").close()
        before = _files(tmp_path)
        with pytest.raises(LedgerError) as info:
            CALLS[name](ledger, fact_id, value)
        assert _files(tmp_path) == before
        fact = ledger.get(fact_id)
        assert fact is not None and fact.value == 1 and fact.forgotten is None
    assert info.value.field == name.rsplit(".", 1)[1], str(info.value)
    assert info.value.field in str(info.value)


def test_an_outbox_is_not_created_for_a_refused_server(tmp_path: Path) -> None:
    """``create_memory_server`` checks its flags before it builds anything (its outbox file)."""
    with Ledger(tmp_path / "ledger.jsonl") as ledger, pytest.raises(LedgerError):
        create_memory_server(ledger, require_gateway="", outbox=tmp_path / "outbox.jsonl")
    assert not (tmp_path / "outbox.jsonl").exists()


def _bool_keywords(owner: str, func: Callable[..., Any]) -> set[str]:
    found = set()
    for p in inspect.signature(func).parameters.values():
        kind = str(p.annotation)
        if isinstance(p.default, bool) or kind == "bool" or "Certify" in kind:
            found.add(f"{owner}.{p.name}")
    return found


def test_every_boolean_keyword_of_the_api_is_held_here() -> None:
    """A boolean keyword added to the API without its check fails here first."""
    found = _bool_keywords("Ledger", Ledger.__init__)
    for name, member in inspect.getmembers(Ledger, inspect.isfunction):
        if not name.startswith("_"):
            found |= _bool_keywords(name, member)
    found |= _bool_keywords("value_digest", value_digest)
    found |= _bool_keywords("create_memory_server", app.create_memory_server)
    assert found == set(CALLS)
