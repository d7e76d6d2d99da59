"""A misspelt backend option is refused, not swallowed (``backendoptions``).

``Ledger(path, max_md=1)`` used to open with the default 16 MB cap, ``Ledger(path,
forget_mod="crypto-shred")`` in plain mode: every keyword the ledger does not take goes to the
backend, and the builtin backends took any keyword. Now the backend's factory is held to its
own signature before it is called, and nothing is created by a refused open.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.backendoptions import LEDGER_KEYWORDS, taken_options
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.plugin import hookimpl
from agent_custody_state.plugins import PluginManager

Register = Callable[..., None]


@pytest.mark.parametrize(
    ("option", "hint"),
    [
        ("max_md", "(did you mean 'max_mb'?)"),
        ("on_tron", "(did you mean 'on_torn'?)"),
        ("forget_mod", "(did you mean the ledger's 'forget_mode'?)"),
        ("checkpoint_evry", "(did you mean the ledger's 'checkpoint_every'?)"),
        ("colour", "; its options: lock_timeout, max_mb, on_torn, read_only"),
    ],
)
def test_a_misspelt_option_is_refused_and_nothing_is_created(
    tmp_path: Path, option: str, hint: str
) -> None:
    path = tmp_path / "ledger.jsonl"
    with pytest.raises(TypeError, match="the jsonl backend takes no option") as raised:
        Ledger(path, **{option: "crypto-shred"})
    assert repr(option) in str(raised.value)
    assert hint in str(raised.value)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_ledger_is_left_byte_identical(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    with Ledger(path) as ledger:
        ledger.assert_fact(space="s", actor="a", subject="acct:42", predicate="plan", value="pro")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(TypeError, match="'max_md'"):
        Ledger(path, max_md=1)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_the_options_a_backend_takes_still_work(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    with Ledger(path, max_mb=1, on_torn="raise") as ledger:
        ledger.assert_fact(space="s", actor="a", subject="acct:42", predicate="plan", value="pro")
    with Ledger(path, read_only=True) as reader:
        assert reader.read_only
    with Ledger("memory:", read_only=True) as empty:
        assert empty.read_only and empty.backend.read_only
    with pytest.raises(TypeError, match="the memory backend takes no option 'max_mb'"):
        Ledger("memory:", max_mb=1)


def test_the_ledger_keywords_named_are_the_ledgers_own() -> None:
    parameters = inspect.signature(Ledger.__init__).parameters.values()
    named = {
        p.name
        for p in parameters
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and p.name not in ("self", "location")
    }
    assert named == LEDGER_KEYWORDS


def test_a_factory_that_declares_any_option_takes_any(
    isolated_plugins: PluginManager, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    def anything(location: str, **options: Any) -> MemoryBackend:
        seen.update(options)
        return MemoryBackend(location)

    def strict(location: str, *, depth: int = 1) -> MemoryBackend:
        return MemoryBackend(location)

    class Acme:
        @hookimpl
        def register_event_backends(self, register: Register) -> None:
            register("anything", anything, schemes=("anything",))
            register("strict", strict, schemes=("strict",))

    isolated_plugins.register_plugin(Acme(), name="acme")
    assert taken_options(anything) is None and taken_options(strict) == {"depth"}
    isolated_plugins.open_backend("anything://x", colour="red").close()
    assert seen == {"colour": "red"}
    isolated_plugins.open_backend("strict://x", depth=2).close()
    with pytest.raises(TypeError, match=r"the strict backend takes no option 'dept' \(did you"):
        isolated_plugins.open_backend("strict://x", dept=2)
