"""The seventeenth review: fresh eyes on the shutdown delay, the keyword-mistake messages,
``sweep --json`` on a stopped sweep, the install hints, the erasure log and readiness.

- ``Ledger(location, backend="postgresql")`` with the PostgreSQL plugin installed (under its
  name ``postgres``) said to install it: the hint is for a backend not installed; here the
  scheme was given for the name, and the installed list names it.
- A line of the erasure log naming a forgotten fact with a live value's key id (the log is not
  signed: forged, or damaged) made ``verify`` fail for good ("its data key is in the key store
  ... destroy it again with repair"), while ``repair`` rightly kept that key and said "nothing
  to repair": verify now leaves out the keys of the live values it opened, logged as an ERROR,
  as repair does.
- A line of the erasure log nested too deep for the JSON parser (damaged or forged: the log is
  not signed) raised ``RecursionError`` out of ``verify``, ``repair`` and ``certificate
  reapply``; it is skipped as any other line that does not parse.
- ``assert_fact(request, preconditon=...)`` (a misspelt ``precondition``, which a caller relies
  on for a safe write) was told "takes an AssertRequest or keyword arguments, not both ... use
  request.with_()", and without a request "did you mean 'predicate'?"; ``validate_assert(request,
  precondition=...)`` was told to use ``with_()`` too. A keyword the method does not take is
  now named as Python names it, with ``assert_fact``'s own ``precondition`` among the
  suggestions.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.keystore import append_erasures, read_erasures
from agent_custody_state.ledger.requests import AssertRequest
from agent_custody_state.plugins import PluginError, PluginManager

sys.path.insert(0, str(Path(__file__).parent))

from test_review12_restores import Folder, cli

# -- 1. an install hint only for what is not installed -------------------------------------------


def test_postgresql_named_with_postgres_installed_does_not_say_install(tmp_path: Path) -> None:
    host = PluginManager(load_entry_points=False)
    host.backends["postgres"] = host.backends["memory"]  # as if the plugin were installed
    with pytest.raises(PluginError) as refused:
        Ledger(tmp_path / "l.jsonl", backend="postgresql", host=host)
    said = str(refused.value)
    assert said == "unknown event backend 'postgresql'; installed: jsonl, memory, postgres"
    del host.backends["postgres"]  # not installed: the hint stays
    with pytest.raises(PluginError, match="install agent-custody-state-events-postgres"):
        Ledger(tmp_path / "l.jsonl", backend="postgresql", host=host)


# -- 2. verify and repair agree on a log line naming a live value's key ---------------------------


def test_a_forged_log_line_naming_a_live_key_does_not_fail_verify_for_good(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    folder = Folder(tmp_path)
    kept_kid = json.loads(folder.ledger.read_text().splitlines()[1])["fact"]["value"]["kid"]
    with (folder.live / "l.jsonl.shredded").open("a") as out:
        out.write("\n" + json.dumps({"factId": folder.gone, "keyIds": [kept_kid]}))
    mode = ("--forget-mode", "crypto-shred", "--key-store", str(folder.keys))
    code, said = cli(capsys, "verify", "--ledger", str(folder.ledger), *mode)
    assert code == 0, said  # repair keeps that key: a failure nothing could ever clear
    assert "kept" in caplog.text and kept_kid in caplog.text  # but not in silence
    assert "nothing to repair" in cli(capsys, "repair", "--ledger", str(folder.ledger), *mode)[1]
    shutil.copy(folder.keys_backup, folder.keys)  # a real restore is still found
    code, said = cli(capsys, "verify", "--ledger", str(folder.ledger), *mode)
    assert code == 1 and f"its data key {folder.kid} is in the key store" in said


# -- 3. a line nested too deep is skipped, not a crash ---------------------------------------------


def test_an_erasure_log_line_nested_too_deep_is_skipped(tmp_path: Path) -> None:
    log = tmp_path / "l.jsonl.shredded"
    append_erasures(log, {"k1": "f1"}, "keys")
    with log.open("a") as out:
        out.write("\n" + "[" * 100_000 + "]" * 100_000)
    append_erasures(log, {"k2": "f2"}, "keys")
    assert read_erasures(log) == {"f1": ["k1"], "f2": ["k2"]}


# -- 4. a keyword the method does not take is named as such ---------------------------------------

FACT = {"subject": "s", "predicate": "p", "value": 1, "space": "org", "actor": "a"}


def test_a_misspelt_precondition_is_named_and_suggested() -> None:
    ledger = Ledger("memory:")
    request = AssertRequest(**FACT)
    typo = "assert_fact() got an unexpected keyword argument 'preconditon' (did you mean "
    with pytest.raises(TypeError) as beside:
        ledger.assert_fact(request, preconditon=None)
    assert str(beside.value) == typo + "'precondition'?)"
    with pytest.raises(TypeError) as alone:
        ledger.assert_fact(**FACT, preconditon=None)
    assert str(alone.value) == typo + "'precondition'?)"
    with pytest.raises(TypeError) as validating:
        ledger.validate_assert(request, precondition=None)  # not one of its parameters
    assert str(validating.value) == (
        "validate_assert() got an unexpected keyword argument 'precondition'"
    )
    with pytest.raises(TypeError, match="not both"):  # a field beside the request: as before
        ledger.assert_fact(request, actor="b")
    assert ledger.count() == 0
