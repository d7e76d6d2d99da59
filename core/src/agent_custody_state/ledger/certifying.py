"""Erasure certificates of forgets and sweeps (``certificate=``, ``certificates=``): a mixin
of ``Ledger``, through ``LedgerForgetting``.

``certifying`` resolves what a ``certificate=`` argument asks for, and the key that signs it,
before anything is forgotten (a missing key refuses the call and changes nothing);
``_certify`` builds and signs the certificates once the forgets are done and compacted,
after one scan of the ledger's own files (and a crypto-shred key store's) for every value
(``bytescan``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.bytescan import scan_files
from agent_custody_state.ledger.certificate import (
    CertificateOptions,
    CertifiedForget,
    Forgetting,
    draft,
    media_location,
    options_of,
    sign,
    signing_key,
)
from agent_custody_state.ledger.chain import ChainWriter
from agent_custody_state.ledger.checkpoints import ledger_origin
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.residual import compaction_residue
from agent_custody_state.timeutil import format_time, utc_now

if TYPE_CHECKING:
    from agent_custody_state.keys import KeyPair

#: What ``certificate=`` takes: a bool, or the options of the certificate.
Certify = bool | CertificateOptions


class LedgerCertifying:
    """``certifying`` and ``_certify``; ``Ledger`` provides the backend and the chain."""

    backend: EventBackend
    forget_mode: str
    _chain: ChainWriter

    def certifying(
        self, certificate: Certify, name: str = "certificate"
    ) -> tuple[CertificateOptions | None, KeyPair | None]:
        """The options and signing key a ``certificate=`` argument (the parameter ``name``)
        stands for (None, None for no certificate); ``LedgerError`` when it is neither a bool,
        None nor ``CertificateOptions``, and (code ``no_signing_key``) when there is no key."""
        options = options_of(certificate, name)
        if options is None:
            return None, None
        checkpointer = self._chain.checkpointer
        try:
            key = signing_key(options, checkpointer.key if checkpointer is not None else None)
        except ValueError as exc:
            raise LedgerError(str(exc), field="certificate", code="no_signing_key") from None
        return options, key

    def _certify(
        self, done: list[Forgetting], options: CertificateOptions, key: KeyPair
    ) -> list[CertifiedForget]:
        """Scan the ledger's files once for every value, then build and sign each certificate
        (with what the compaction told it left: ``compaction_residue``)."""
        residue = compaction_residue(self.backend)
        files = self.backend.local_files()
        scans = None
        if files is not None:
            keys = getattr(self.backend, "keys", None)  # crypto-shred: the key store's files too
            key_files = keys.local_files() if keys is not None else None
            values = {d.event.fact_id: d.assert_event.fact.value for d in done}
            destroyed = {d.event.fact_id: d.keys for d in done}
            scans = scan_files([*files, *(key_files or [])], values, destroyed)
        done = [replace(d, keys=()) for d in done]  # the destroyed keys go no further
        origin = ledger_origin(self.backend)
        now = format_time(utc_now())
        certified = []
        for forgetting in done:
            predicate = draft(
                forgetting,
                backend=self.backend.kind,
                ledger_id=origin,
                location=media_location(self.backend),
                forget_mode=self.forget_mode,
                scan=scans[forgetting.event.fact_id] if scans is not None else None,
                options=options,
                now=now,
                residue=residue,
            )
            envelope = sign(predicate, forgetting, key)
            certified.append(
                CertifiedForget(forgetting.event, envelope, forgetting, predicate, key)
            )
        return certified


__all__ = ["Certify", "LedgerCertifying"]
