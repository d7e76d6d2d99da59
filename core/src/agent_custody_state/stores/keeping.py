"""How ``Custody`` keeps its erasure certificates in its archive (``certificates=``): each as it
is issued (``_keep``), behind an intent recorded before the forgets (``_intend``) and removed
once they are kept (``_close_intent``), and the intents a killed process left finished at the
next start (``finish_intents``, from ``Custody.resume``). See ``stores.intents``.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_custody_state.ledger.certificate import CertificateOptions, CertifiedForget
from agent_custody_state.ledger.certifying import CertificateNotMade
from agent_custody_state.ledger.chain import chain_record
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import ForgetEvent
from agent_custody_state.stores import intents
from agent_custody_state.stores.archive import CertificateArchive

if TYPE_CHECKING:
    from agent_custody_state.stores.certificate import StoresPart
    from agent_custody_state.stores.storeset import StoreSet

log = logging.getLogger(__name__)


def position(ledger: Ledger) -> int:
    """The ledger's events now, the position an intent records: the chain ``seq`` of the last
    event (one read: the last line of JSONL's index, one indexed row in SQL; a sealed last
    event is not opened), else ``count()`` (a last event without a chain record: written by
    the TypeScript original, or with the chain off). A forget committed later has a greater
    ``seq`` (``intents._forgotten_by``). Not ``chain_head()``, which reads back to the last
    chain record."""
    from agent_custody_state.ledger.shred import ShreddingBackend

    backend = ledger.backend
    raw = backend.inner if isinstance(backend, ShreddingBackend) else backend
    last = raw.last_event()
    record = None if last is None else chain_record(last)
    return int(record["seq"]) if record is not None else backend.count()


class OwnForget:
    """A forget flow's call of ``Ledger.forget`` (``forget``), and what it committed: ``ids``,
    the only forget its intent certifies: its event id once the ledger returns it; none when
    the ledger refused the call (``LedgerError``: nothing was written, e.g. already forgotten
    by another request at the same moment, whose certificate is still being made); unknown
    (None) when the call failed otherwise (it may have committed: the case intents are for).
    Before, a retried forget refused as already forgotten issued a ``recovered`` certificate of
    the first request's forget, saying its process had stopped (the first one's went to
    ``.2.json``). ``certified``: the ledger's certificate, when it made one.

    ``not_made``: the ``CertificateNotMade`` of a forget that committed but whose certificate
    failed; ``forget`` then returns its event, so the flow goes on to remove the value from
    the stores (before, it raised at once: the erased value stayed in every store, for good
    without an outbox, else until the next start), and raises it after."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.ids: set[str] | None = None
        self.certified: list[CertifiedForget] = []
        self.not_made: CertificateNotMade | None = None

    def forget(self, **kwargs: Any) -> ForgetEvent:
        """``Ledger.forget(**kwargs)``, noting what it committed; its event."""
        try:
            done: ForgetEvent | CertifiedForget = self.ledger.forget(**kwargs)
        except LedgerError:
            self.ids = set()  # a refusal: the ledger is unchanged
            raise
        except CertificateNotMade as exc:  # committed and compacted: the event is known
            self.not_made, done = exc, exc.events[0]
        if isinstance(done, CertifiedForget):
            self.certified.append(done)
        event = done.event if isinstance(done, CertifiedForget) else done
        self.ids = {event.event_id}
        return event


class CertificateKeeping:
    """The archive's part of the flows; ``flows.Custody`` provides the rest."""

    ledger: Ledger
    run: Any
    stores: StoreSet
    #: every certificate issued is kept here (``archive``); None: only in the answers
    certificates: CertificateArchive | None

    def _certificate_options(self, certificate: Any) -> CertificateOptions | None:
        raise NotImplementedError

    async def _keep(self, fact_id: str, certificate: dict[str, Any]) -> Path | None:
        """Keep ``certificate`` in the archive, when there is one (a failure is logged)."""
        if self.certificates is None:
            return None
        kept: Path | None = await self.run(self.certificates.keep_logged, fact_id, certificate)
        return kept

    def _intend(
        self,
        facts: Collection[str],
        actor: str,
        reason: str,
        receipt_id: str | None,
        options: CertificateOptions | None,
    ) -> intents.Intent | None:
        """Record, before the forgets, that ``facts`` are to be certified (blocking: call it
        where the ledger is called); None without an archive or certificates."""
        if self.certificates is None or options is None or not facts:
            return None
        stored = intents.stored_kinds(self.ledger, facts)
        # The ledger's clock, which stamps the forgets: on the wall clock, a ledger's own clock
        # behind it (``Ledger(clock=...)``) had every forget read as older than its intent.
        at = self.ledger.now()
        # Where the ledger stands: its forgets come after it, whatever the clock says (a clock
        # stepped back between the two lost the certificate; one forget just before it, in the
        # same millisecond, could be taken for its own).
        where = position(self.ledger)
        return intents.record(
            self.certificates, facts, actor, reason, receipt_id, stored, at, where
        )

    async def _intend_one(
        self,
        fact_id: str,
        actor: str,
        reason: str,
        receipt_id: str | None,
        options: CertificateOptions | None,
    ) -> intents.Intent | None:
        """``_intend`` for one forget, off the event loop (nothing to do without an archive)."""
        if self.certificates is None or options is None:
            return None
        made: intents.Intent | None = await self.run(
            self._intend, [fact_id], actor, reason, receipt_id, options
        )
        return made

    async def _close_intent(
        self,
        intent: intents.Intent | None,
        options: CertificateOptions | None,
        issued: Mapping[str, bool],
        mine: Collection[str] | None = None,
        checked: Mapping[str, StoresPart] | None = None,
    ) -> None:
        """The flow is over: certificates now for the intent's facts forgotten with none
        ``issued`` (fact id: whether it was kept; a forget that failed after its commit, a
        stopped sweep whose own certificates could not be made: ``ledger.stopped``), then the
        intent removed, but kept when an issued one was not
        (a full disk: the next start issues it into the folder); dropped when all were kept.
        ``mine``: the forget event ids the flow committed, when known; ``checked``: per fact,
        its stores as the flow's removal found them (``intents.settle``: not ``unknown``).
        However it ends, the intent is no longer this process's (``intents.release``): one
        this raised over is left to the next ``resume``, in this process too."""
        if intent is None:
            return
        try:
            if self.certificates is None or options is None:
                return
            if all(issued.get(fact_id) for fact_id in intent.facts):
                await self.run(intents.drop, intent)
                return
            final = all(issued.values())
            await self.run(
                partial(
                    intents.settle,
                    final=final,
                    mine=mine,
                    checked=checked,
                    store_named=self.stores.by_name,
                ),
                self.certificates,
                self.ledger,
                intent,
                options,
                list(issued),
            )
        finally:
            intents.release(intent)

    async def _close_failed(
        self,
        intent: intents.Intent | None,
        options: CertificateOptions | None,
        issued: Mapping[str, bool],
        mine: Collection[str] | None = None,
        checked: Mapping[str, StoresPart] | None = None,
    ) -> None:
        """``_close_intent`` for a flow that is raising: a failure here is logged, never
        raised over the flow's own error (which says what happened to the erasure)."""
        try:
            await self._close_intent(intent, options, issued, mine, checked)
        except Exception as exc:
            path = intent.path if intent is not None else None
            log.error("erasure intent %s left for the next start, not finished: %s", path, exc)

    async def finish_intents(self) -> list[Path]:
        """At start: finish the intents a killed process left in the archive (the files
        written). Without a signing key they are left for a start that has one."""
        if self.certificates is None:
            return []
        found = await self.run(intents.pending, self.certificates)
        if not found:
            return []
        try:
            options = self._certificate_options(True)
        except LedgerError as exc:
            log.error("erasure intents left in %s, not finished: %s", self.certificates, exc)
            return []
        written: list[Path] = []
        for intent in found:
            try:
                written += await self.run(
                    partial(intents.settle, store_named=self.stores.by_name),
                    self.certificates,
                    self.ledger,
                    intent,
                    options,
                )
            except Exception as exc:  # one intent never stops a start, nor the outbox after it
                log.error("erasure intent %s left as it is, not finished: %s", intent.path, exc)
        return written
