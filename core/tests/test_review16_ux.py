"""The sixteenth review: small things a newcomer and an operator hit.

- ``Ledger.assert_fact(receipt=...)`` failed with ``AssertRequest.__init__() got an unexpected
  keyword argument 'receipt'``, naming a class the caller never called; now the message names
  ``assert_fact`` (or ``validate_assert``) and suggests the close field (``receipt_id``), still
  a ``TypeError``. A request given with keyword arguments beside it wrote the request and
  dropped the keywords silently; a mapping given where a request goes failed with an
  ``AttributeError`` (``assert_fact``, ``Custody.write``). ``assert_many``'s "unknown argument"
  suggests the close field too.
- ``sweep --json`` on a sweep a full disk stopped part-way printed only the error: now the JSON
  of what it did is on standard output (memory.sweep's second text item), the error on standard
  error, exit 1. With ``--certificates`` the JSON carries each fact's certificate, as the
  tool's structured content does: before, an unkept certificate was printed nowhere.
- A backend named and not installed (``Ledger(location, backend="postgres")``) says what to
  install, as a ``postgresql://`` location does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.plugins import PluginError, PluginManager
from agent_custody_state.stores.flows import Custody

sys.path.insert(0, str(Path(__file__).parent))

FACT: dict[str, Any] = {"subject": "s", "predicate": "p", "value": 1, "space": "org", "actor": "a"}


# -- 1. keyword mistakes name the method called ------------------------------------------------


@pytest.mark.parametrize("method", ["assert_fact", "validate_assert"])
@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {**FACT, "receipt": "r1"},
            "got an unexpected keyword argument 'receipt' (did you mean 'receipt_id'?)",
        ),
        (  # the wire name (SPEC 1.1) finds its parameter
            {**FACT, "validFrom": "2026-01-01T00:00:00Z"},
            "got an unexpected keyword argument 'validFrom' (did you mean 'valid_from'?)",
        ),
        ({**FACT, "colour": "red"}, "got an unexpected keyword argument 'colour'"),
        (
            {k: v for k, v in FACT.items() if k != "space"},
            "missing 1 required keyword argument: 'space'",
        ),
        (
            {"subject": "s", "predicate": "p", "value": 1},
            "missing 2 required keyword arguments: 'space' and 'actor'",
        ),
    ],
)
def test_a_keyword_mistake_names_the_method_called(
    method: str, given: dict[str, Any], message: str
) -> None:
    with Ledger("memory:") as ledger:
        with pytest.raises(TypeError) as refused:
            getattr(ledger, method)(**given)
        assert str(refused.value) == f"{method}() {message}"
        assert ledger.backend.count() == 0


def test_a_request_with_keywords_or_a_mapping_is_refused_not_half_taken() -> None:
    """Before: the keywords beside a request were dropped (``subject`` "s" written, not "t");
    a mapping failed with ``AttributeError: 'dict' object has no attribute 'fact_id'``."""
    request = AssertRequest(**FACT)
    with Ledger("memory:") as ledger:
        with pytest.raises(TypeError, match=r"^assert_fact\(\) takes an AssertRequest or keyword"):
            ledger.assert_fact(request, subject="t")
        with pytest.raises(TypeError, match=r"not a dict \(pass \*\*item, or AssertRequest.of"):
            ledger.assert_fact(FACT)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"^validate_assert\(\) takes an AssertRequest"):
            ledger.validate_assert(request, actor="b")
        custody = Custody(ledger)
        with pytest.raises(TypeError, match=r"^Custody.write\(\) takes an AssertRequest, not a"):
            anyio.run(custody.write, FACT)  # type: ignore[arg-type]
        assert ledger.backend.count() == 0
        assert ledger.assert_fact(request).fact.subject == "s"  # the right calls still work
        assert ledger.assert_fact(**{**FACT, "subject": "t"}).fact.subject == "t"


def test_a_batch_items_unknown_argument_suggests_the_close_one() -> None:
    with Ledger("memory:") as ledger:
        with pytest.raises(LedgerError) as refused:
            ledger.assert_many([FACT, {**FACT, "receiptId": "r"}])
        assert (
            str(refused.value)
            == "item 1: unknown argument 'receiptId' (did you mean 'receipt_id'?)"
        )
        assert ledger.backend.count() == 0


# -- 2. sweep --json on a sweep stopped part-way -------------------------------------------------


def _json_sweep_on_a_full_disk(folder: Path) -> tuple[int, str, str, int]:
    from test_review9_exhaust import disk_full_past
    from test_review12_certs import cli

    path = folder / "l.jsonl"
    with Ledger(path) as book:
        for n in range(4):
            book.assert_fact(**{**FACT, "subject": f"s{n}", "value": f"v{n}"})
    with disk_full_past(path.stat().st_size + 600):  # room for one forget, not two
        code, out, err = cli(
            "sweep", "--ledger", str(path), "--before", "2999-01-01T00:00:00Z", "--reason", "r",
            "--json",
        )  # fmt: skip
    forgets = sum('"kind":"forget"' in line for line in path.read_text().splitlines())
    return code, out, err, forgets


def test_sweep_json_stopped_by_a_full_disk_prints_what_it_did(tmp_path: Path) -> None:
    from test_review9_exhaust import in_child

    code, out, err, forgets = in_child(_json_sweep_on_a_full_disk, tmp_path)
    assert code == 1 and forgets == 1, out + err
    assert "the sweep stopped after forgetting 1 fact" in err, err
    data = json.loads(out)  # before: nothing on standard output
    assert [item["digestKind"] for item in data["forgotten"]] == ["sha256"]
    assert data["before"] == "2999-01-01T00:00:00.000Z" and data["stillHeld"] == []
    assert data["forgotten"][0]["factId"] in err  # the same fact both say was forgotten


def test_sweep_json_carries_the_certificates_it_could_not_keep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--json``: "the certificates are printed on standard output" was untrue: the JSON had
    none, and they cannot be issued again."""
    from test_review12_certs import cli, world

    from agent_custody_state.stores import archive as archive_module

    ledger, folder, key, _, facts = world(tmp_path, 2)

    def refused(*_: Any, **__: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(archive_module, "write_new", refused)
    code, out, err = cli(
        "sweep", "--ledger", str(ledger), "--before", "2999-01-01T00:00:00Z", "--reason", "r",
        "--certificates", str(folder), "--key", str(key), "--json",
    )  # fmt: skip
    assert code == 1 and "2 certificates could not be kept" in err, out + err
    data = json.loads(out)  # one JSON document: the certificates are not printed again
    assert sorted(item["factId"] for item in data["forgotten"]) == sorted(facts)
    assert all("payload" in item["certificate"] for item in data["forgotten"])


# -- 3. a backend named, not installed ---------------------------------------------------------


@pytest.mark.parametrize(
    ("backend", "hint"),
    [
        ("postgres", "; install agent-custody-state-events-postgres (pip install "),
        ("postgresql", "'agent-custody-state[postgres]')"),
        ("sqlite", "; install agent-custody-state-events-sqlite"),
    ],
)
def test_a_backend_named_but_not_installed_says_what_to_install(
    tmp_path: Path, backend: str, hint: str
) -> None:
    bare = PluginManager(load_entry_points=False)  # builtins only, whatever is installed here
    with pytest.raises(PluginError) as refused:
        Ledger(tmp_path / "l.db", backend=backend, host=bare)
    said = str(refused.value)
    assert said.startswith(f"unknown event backend {backend!r}; installed: jsonl, memory")
    assert hint in said
    assert not list(tmp_path.iterdir())  # nothing created
    with pytest.raises(PluginError) as unknown:
        Ledger(tmp_path / "l.db", backend="nosuch", host=bare)
    assert str(unknown.value) == "unknown event backend 'nosuch'; installed: jsonl, memory"
