"""Erasure certificates of forgets and sweeps (``certificate=``, ``certificates=``): a mixin
of ``Ledger``, through ``LedgerForgetting``.

``certifying`` resolves what a ``certificate=`` argument asks for, and the key that signs it,
before anything is forgotten (a missing key refuses the call and changes nothing);
``_certify`` builds and signs the certificates once the forgets are done and compacted,
after one scan of the ledger's own files (and a crypto-shred key store's) for every value
(``bytescan``). When that fails the forgets stand (committed and compacted before it): the
error, ``CertificateNotMade``, says so, names each fact and forget event, and keeps the failure
as its cause, so a caller neither retries nor believes the value is still there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from agent_custody_state.ledger.backend import EventBackend, EventBackendError
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
    from agent_custody_state.ledger.model import ForgetEvent

#: What ``certificate=`` takes: a bool, or the options of the certificate.
Certify = bool | CertificateOptions

#: The facts a ``CertificateNotMade`` message names one by one (a sweep may forget thousands).
NAMED = 5
#: What the error says of sweeping again: true of a sweep that ran to its end (a custody flow
#: stopped before its later passes says otherwise: ``stores.sweep_stopped``).
NOT_AGAIN = "do not sweep again for them (nothing is left to forget)"


class CertificateNotMade(EventBackendError):
    """Forgets that stand without their erasure certificates: each was committed and compacted
    before making its certificate failed (the ``__cause__``, and ``cause``). ``events``: the
    forget events. Not a ``LedgerError``: that is a refusal, after which nothing changed.
    ``still_held``: the stores a custody flow then asked that still hold the value, with why
    (``still_held_by``), said after the ledger's account, whose "erased" is not true of them."""

    def __init__(
        self, events: Sequence[ForgetEvent], cause: Exception, still_held: str = ""
    ) -> None:
        self.events, self.cause = tuple(events), cause
        held = f"; the value is still held by {still_held}" if still_held else ""
        super().__init__(_not_made(self.events, cause) + held)

    def still_held_by(self, still_held: str) -> CertificateNotMade:
        """This error, saying the stores in ``still_held`` (``<store>: <why>; ...``) still hold
        the value (none: itself), its cause kept."""
        if not still_held:
            return self
        error = CertificateNotMade(self.events, self.cause, still_held)
        error.__cause__ = self.cause
        return error


def _not_made(events: Sequence[ForgetEvent], cause: Exception) -> str:
    """What stands, what failed, and what the caller can do: the failure's text when it is an
    I/O or backend error (they name files and locations), else only its type (another's text
    might quote the value)."""
    one = len(events) == 1
    named = ", ".join(f"{e.fact_id} (forget event {e.event_id})" for e in events[:NAMED])
    if len(events) > NAMED:
        named += f" and {len(events) - NAMED} more (the error's events)"
    text = str(cause) if isinstance(cause, OSError | EventBackendError) else ""
    why = text or type(cause).__name__
    return (
        f"{'fact' if one else 'facts'} {named} {'is' if one else 'are'} forgotten, but "
        f"{'its erasure certificate' if one else 'their erasure certificates'} could not be "
        f"made: {why}. "
        + (
            "The forget stands: the value is erased and the forget event is in the ledger "
            "(history, export); do not forget again (it is refused as already forgotten). "
            if one
            else "The forgets stand: the values are erased and the forget events are in the "
            f"ledger (history, export); {NOT_AGAIN}. "
        )
        + "A certificate cannot be made again (its byte scan needs the value): a custody flow "
        'or server with a certificates folder (certificates = "DIR") keeps a recovered '
        "certificate there (outcome partial, not verified), now or at its next start"
    )


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
        """``_certified``, or ``CertificateNotMade`` when it fails: the forgets ``done`` stand."""
        try:
            return self._certified(done, options, key)
        except Exception as exc:
            raise CertificateNotMade([d.event for d in done], exc) from exc

    def _certified(
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


__all__ = ["CertificateNotMade", "Certify", "LedgerCertifying"]
