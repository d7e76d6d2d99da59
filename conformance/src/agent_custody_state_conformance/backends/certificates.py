"""Event-backend rules for erasure certificates (``docs/proofs.md``, "Certificates").

A backend's part is one question, ``EventBackend.local_files()``: the files on this machine that
hold its events (None: not scannable). The rule holds the answer to account: the byte scan over
those files must find a distinctive value before it is forgotten (a list that names the wrong
files could never find anything) and nothing after, and the signed certificate must verify
against the backend's stored events.
"""

from __future__ import annotations

import os

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger
from agent_custody_state.keys import PublicKeyRef
from agent_custody_state.ledger.bytescan import scan_files
from agent_custody_state.ledger.certificate import CertificateOptions
from agent_custody_state.ledger.certverify import check_against, check_certificate

from ..rules import rule
from .base import BackendRules

__all__ = ["CertificateRules"]

SECRET = "erasure-probe-7f3a9c: dana@example.org"


class CertificateRules(BackendRules):
    """``local_files`` and the certificate of a forget over any backend."""

    __suite_root__ = True

    @rule("CE-1")
    def test_local_files_hold_the_value_until_it_is_forgotten(self, ledger: Ledger) -> None:
        """``local_files()`` is None (not scannable) or names files that hold the events: a
        value is found in them before its forget and not after, and the forget's certificate
        verifies against the stored events, outcome complete.

        Troubleshooting: return every file the engine writes the events to (journals, WAL,
        temporaries included), with cached pages written out first; return None when they are
        not on this machine.
        """
        key = Ed25519PrivateKey.generate()
        fact = self._assert(ledger, value=SECRET)
        self._assert(ledger, subject="acct:43", value="kept")
        files = ledger.backend.local_files()
        if files is not None:
            assert all(isinstance(f, str) for f in files)
            assert any(os.path.isfile(f) for f in files), files
            before = scan_files(files, {"v": SECRET})["v"]
            assert before.hits > 0, f"the value is in none of {files}"
        options = CertificateOptions(key=key)
        done = ledger.forget(fact_id=fact.fact_id, actor="x", reason="r", certificate=options)
        if files is not None:
            assert scan_files(ledger.backend.local_files() or [], {"v": SECRET})["v"].hits == 0
        statement = check_certificate(done.certificate, PublicKeyRef.of(key.public_key()))
        predicate = statement["predicate"]
        scan = predicate["verification"]["byteScan"]
        assert (scan.get("scanned") is False) == (files is None)
        if files is not None:
            assert scan["hits"] == 0 and scan["filesScanned"] >= 1
            assert predicate["outcome"] == "complete"
        check_against(statement, ledger.backend.stored_events())
