"""Event-backend rules for erasure certificates (``docs/proofs.md``, "Certificates").

A backend's part is one question, ``EventBackend.local_files()``: the files on this machine that
hold its events (None: not scannable). The rule holds the answer to account: the byte scan over
those files must find a distinctive value before it is forgotten (a list that names the wrong
files could never find anything) and nothing after, and the signed certificate must verify
against the backend's stored events. In crypto-shred mode (CE-2) the key store answers the same
question (``KeyStore.local_files``), and the rule holds it to account with the fact's data key;
a value that mode holds unencrypted is certified as it was erased (CE-3).
"""

from __future__ import annotations

import os

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger
from agent_custody_state.keys import PublicKeyRef
from agent_custody_state.ledger.bytescan import scan_files
from agent_custody_state.ledger.certificate import CertificateOptions
from agent_custody_state.ledger.certverify import check_against, check_certificate
from agent_custody_state.ledger.envelope import kid_of
from agent_custody_state.ledger.model import event_from_dict
from agent_custody_state.ledger.residual import residual_windows
from agent_custody_state.ledger.shred import ShreddingBackend

from ..rules import rule
from .base import BackendRules, original_assert

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

    @rule("CE-2")
    def test_crypto_shred_certificate_is_purge_and_scans_the_key_store(
        self, shredded: Ledger
    ) -> None:
        """In crypto-shred mode a forget's certificate is Purge / crypto-shred with no residual
        windows, verifies against the stored events with outcome complete, and its byte scan
        covers the key store's files too: ``KeyStore.local_files()`` is None (not scannable) or
        names files that hold the fact's data key (raw, base64 or hex) before the forget and
        not after; the scan records those files with 0 hits of the value and the key.

        Troubleshooting: return the key store's files (journals and WAL included) with cached
        pages written out, and erase a destroyed key's old bytes in ``compact``.
        """
        backend = shredded.backend
        assert isinstance(backend, ShreddingBackend)
        key = Ed25519PrivateKey.generate()
        fact = self._assert(shredded, value=SECRET)
        self._assert(shredded, subject="acct:43", value="kept")
        stored = backend.inner.get_assert(fact.fact_id)
        kid = kid_of(stored.fact.value) if stored is not None else None
        assert kid is not None, "the value is not stored encrypted"
        data_key = backend.keys.get([kid])[kid]
        key_files = backend.keys.local_files()
        if key_files is not None:
            assert scan_files(key_files, {"k": data_key})["k"].hits > 0, (
                f"the data key is in none of {key_files}"
            )
        options = CertificateOptions(key=key)
        done = shredded.forget(fact_id=fact.fact_id, actor="x", reason="r", certificate=options)
        if key_files is not None:
            assert scan_files(backend.keys.local_files() or [], {"k": data_key})["k"].hits == 0
        statement = check_certificate(done.certificate, PublicKeyRef.of(key.public_key()))
        predicate = statement["predicate"]
        assert predicate["sanitization"]["category"] == "Purge"
        assert predicate["sanitization"]["method"] == "crypto-shred"
        assert predicate["residualWindows"] == []
        scan = predicate["verification"]["byteScan"]
        if backend.local_files() is not None:
            assert scan["hits"] == 0 and {"raw", "utf-8"} <= set(scan["forms"])
            scanned = {f["path"] for f in scan["files"]}
            existing = {f for f in key_files or [] if os.path.isfile(f)}
            assert existing <= scanned, "the key store's files are not in the scan"
        assert predicate["outcome"] == "complete"
        assert not done.forgetting.keys, "the certificate kept the destroyed key"
        check_against(statement, backend.stored_events())

    @rule("CE-3")
    def test_a_value_stored_unencrypted_is_certified_as_cleared(self, shredded: Ledger) -> None:
        """A crypto-shred ledger may hold values stored as they are (written before it took
        that mode, or by the original): forgetting one, the certificate says how it was
        erased: Clear / overwrite-and-vacuum with the backend's residual windows (a backup
        taken before the forget holds the value), never Purge; a sealed value beside it is
        still Purge.

        Troubleshooting: the method follows the stored assert's value (an envelope or not),
        which ``get_assert`` of the inner backend must return as stored.
        """
        backend = shredded.backend
        assert isinstance(backend, ShreddingBackend)
        key = Ed25519PrivateKey.generate()
        raw = original_assert("before-shred", value=SECRET)
        with backend.inner.transaction():
            backend.inner.append([event_from_dict(raw)])
        sealed = self._assert(shredded, subject="acct:43", value="sealed")
        options = CertificateOptions(key=key)
        public = PublicKeyRef.of(key.public_key())
        plain = shredded.forget(fact_id=raw["fact"]["factId"], actor="x", reason="r",
                                certificate=options)  # fmt: skip
        predicate = check_certificate(plain.certificate, public)["predicate"]
        assert predicate["sanitization"]["category"] == "Clear"
        assert predicate["sanitization"]["method"] == "overwrite-and-vacuum"
        assert predicate["residualWindows"] == residual_windows(backend.kind, "plain")
        if backend.kind != "memory":
            assert predicate["residualWindows"], "a value stored as it is leaves residual copies"
        done = shredded.forget(fact_id=sealed.fact_id, actor="x", reason="r", certificate=options)
        predicate = check_certificate(done.certificate, public)["predicate"]
        assert predicate["sanitization"]["category"] == "Purge"
        assert predicate["residualWindows"] == []
        check_against(check_certificate(plain.certificate, public), backend.stored_events())
