"""A sweep of several passes whose certificates fail in one is not told it finished (twenty-
second review, second wave).

A retention sweep (or a scoped caller's) runs one ledger sweep per space. When the certificates
of one pass failed (``CertificateNotMade``), the flow stopped there, as it stops at any error,
leaving the later spaces unswept, yet said "the sweep finished, and its store removals were
tried" and, in the error's own words, "do not sweep again for them (nothing is left to
forget)": an operator believed the retention windows applied, while the facts of the spaces
after it stayed. The words now name the spaces not swept and say to run the sweep again; a
sweep whose last pass failed still reads "the sweep finished".
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger
from agent_custody_state.ledger import certifying
from agent_custody_state.ledger.certifying import CertificateNotMade
from agent_custody_state.ledger.retention import RetentionPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.sweep_stopped import stopped_text, swept_before

WINDOW = RetentionPolicy.parse("*=PT0.01S")


@pytest.fixture(autouse=True)
def failing_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The byte scan fails (a file it may not read), after each pass's forgets."""

    def scan(*_: Any, **__: Any) -> Any:
        raise PermissionError(13, "Permission denied", "/data/ledger.jsonl")

    monkeypatch.setattr(certifying, "scan_files", scan)


def _swept(tmp_path: Path, spaces: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """A retention sweep over ``spaces`` (one fact each) whose certificates fail: the text the
    sweep command and ``memory.sweep`` show, and each fact's status after it."""
    with Ledger(tmp_path / "l.jsonl") as ledger:
        ids = {
            space: ledger.assert_fact(
                space=space, subject="s", predicate="p", actor="a", value=space
            ).fact.fact_id
            for space in spaces
        }
        time.sleep(0.03)  # every fact older than the window
        custody = Custody(ledger, certificate_key=Ed25519PrivateKey.generate(), retention=WINDOW)
        with pytest.raises(CertificateNotMade) as caught:
            anyio.run(lambda: custody.sweep(actor="a", reason="r", certificates=True))
        report = swept_before(caught.value)
        assert report is not None
        status = {space: ledger.status(fact_id)[0] for space, fact_id in ids.items()}
    return stopped_text(caught.value, report), status


def test_the_spaces_not_swept_are_named_and_the_sweep_is_to_run_again(tmp_path: Path) -> None:
    text, status = _swept(tmp_path, ("a", "b", "c"))
    assert status == {"a": "forgotten", "b": "current", "c": "current"}  # it stopped there
    assert "the sweep finished" not in text
    assert "nothing is left to forget" not in text
    assert "spaces b, c were not swept" in text
    assert "run the sweep again" in text
    assert "could not be made" in text  # the error's own account of the forgets that stand


def test_a_sweep_whose_last_pass_failed_still_says_it_finished(tmp_path: Path) -> None:
    text, status = _swept(tmp_path, ("a",))
    assert status == {"a": "forgotten"}
    assert text.startswith("the sweep finished, and its store removals were tried: ")
    assert "run the sweep again" not in text
