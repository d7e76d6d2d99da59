"""Forget and sweep (SPEC 2.5, 2.6), with their erasure certificates: a mixin of ``Ledger``.

A forget erases one value; a sweep forgets everything learned before a cutoff. With
``certificate=`` (``certificates=`` for a sweep) each forgotten fact also gets a signed
certificate (``certificate``): the chain head is read just before and just after the forget
inside its write section, and after the backend's ``compact`` the ledger's own files are scanned
for the value (``bytescan``). The signing key is resolved before anything is forgotten, so a
missing key refuses the call and changes nothing (``certifying``, the certificates' mixin).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from agent_custody_state.canonical import value_digest
from agent_custody_state.ledger.arguments import (
    FORGET_WIRE_KEYS,
    bool_arg,
    extra_arg,
    new_id,
    required_time_arg,
    text_arg,
)
from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.certificate import CertificateOptions, CertifiedForget, Forgetting
from agent_custody_state.ledger.certifying import CertificateNotMade, Certify, LedgerCertifying
from agent_custody_state.ledger.compaction import compacted, compacting
from agent_custody_state.ledger.datakeys import data_keys
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.lifecycle import writes
from agent_custody_state.ledger.locking import fact_keys, in_order, section
from agent_custody_state.ledger.model import (
    Event,
    ForgetEvent,
    Forgotten,
    Source,
    handed,
)
from agent_custody_state.ledger.modemark import check_plain_forget
from agent_custody_state.ledger.owned import sweep_args
from agent_custody_state.ledger.queries import RESTORED_KEY, FactState, SweepResult, fact_states
from agent_custody_state.ledger.readonly import check_writable
from agent_custody_state.ledger.requests import TimeLike
from agent_custody_state.ledger.rules import check_known, refuse
from agent_custody_state.ledger.stopped import SWEEP_RESULT, carry

if TYPE_CHECKING:
    from agent_custody_state.keys import KeyPair


def _still_restores(backend: EventBackend, state: FactState, extra: Mapping[str, Any]) -> bool:
    """Whether a sweep's ``restored`` record planned for ``state``'s fact still holds when it is
    forgotten: the fact was not retracted meanwhile (its retraction put back and recorded the
    fact below it itself), the fact put back is neither retracted nor forgotten (it would not
    be current), and no link between them was put on hold (it stays, and is current instead;
    the others are retracted or forgotten, or left to this sweep, as planned)."""
    restored = extra.get(RESTORED_KEY)
    if restored is None:
        return True
    target = restored.get("factId") if isinstance(restored, Mapping) else None
    if state.retracted or not isinstance(target, str):
        return False
    parent = state.assert_event.supersedes
    seen: set[str] = set()
    while parent is not None and parent not in seen:
        seen.add(parent)
        link = fact_states(backend, [parent]).get(parent)
        if link is None:
            return False
        if parent == target:
            return not link.retracted
        if link.held and not link.retracted:
            return False
        parent = link.assert_event.supersedes
    return False


def _check_texts(actor: object, reason: object, receipt_id: object) -> tuple[str, str, Any]:
    """The text arguments of a forget or sweep (``receipt_id``: text or None, SPEC 1.1), as
    plain text (``owned``)."""
    actor, reason = (
        text_arg(actor, "actor", empty_ok=True),
        text_arg(reason, "reason", empty_ok=True),
    )
    if receipt_id is not None:
        receipt_id = text_arg(receipt_id, "receipt_id", empty_ok=True)
    return actor, reason, receipt_id


class LedgerForgetting(LedgerCertifying):
    """``forget`` and ``sweep``; their certificates are ``LedgerCertifying``'s, ``Ledger``
    provides the rest."""

    backend: EventBackend
    forget_key: str | None

    def now(self) -> str:
        raise NotImplementedError

    def _appended(self, events: Sequence[Event]) -> None:
        raise NotImplementedError

    learned_before: Callable[..., list[Any]]  # LedgerReads'

    @overload
    def forget(
        self,
        *,
        fact_id: str,
        actor: str,
        reason: str,
        receipt_id: str | None = None,
        keep_digest: bool = True,
        extra: Mapping[str, Any] | None = None,
        precondition: Callable[[FactState], None] | None = None,
        certificate: Literal[False] = False,
    ) -> ForgetEvent: ...

    @overload
    def forget(
        self,
        *,
        fact_id: str,
        actor: str,
        reason: str,
        receipt_id: str | None = None,
        keep_digest: bool = True,
        extra: Mapping[str, Any] | None = None,
        precondition: Callable[[FactState], None] | None = None,
        certificate: Literal[True] | CertificateOptions,
    ) -> CertifiedForget: ...

    @writes
    def forget(
        self,
        *,
        fact_id: str,
        actor: str,
        reason: str,
        receipt_id: str | None = None,
        keep_digest: bool = True,
        extra: Mapping[str, Any] | None = None,
        precondition: Callable[[FactState], None] | None = None,
        certificate: Certify = False,
    ) -> ForgetEvent | CertifiedForget:
        """Erase a fact's value, keeping its digest (SPEC 2.5); rewrite and record are atomic.

        ``extra``: additional keys recorded on the forget event; ``precondition``: as for
        ``retract``. ``certificate``: True or ``CertificateOptions`` to get a
        ``CertifiedForget`` (the event and its signed erasure certificate) instead of the event.
        """
        check_writable(self, "forget")
        more = extra_arg(extra, FORGET_WIRE_KEYS)
        options, key = self.certifying(certificate)
        event, done = self._forget(
            fact_id, actor, reason, receipt_id, keep_digest, more, precondition, options is not None
        )
        compacted(self, [event])  # announced also when the compaction fails
        if options is None or key is None or done is None:
            return handed(event, self.backend.keeps_objects)
        [certified] = self._certify([done], options, key)
        return certified

    def _forget(
        self,
        fact_id: str,
        actor: str,
        reason: str,
        receipt_id: str | None,
        keep_digest: bool,
        extra: dict[str, Any] | None = None,
        precondition: Callable[[FactState], None] | None = None,
        certify: bool = False,
        planned: bool = False,
    ) -> tuple[ForgetEvent, Forgetting | None]:
        actor, reason, receipt_id = _check_texts(actor, reason, receipt_id)
        bool_arg(keep_digest, "keep_digest")
        with section(self.backend, fact_keys(self.backend, fact_id)):
            fact_id = text_arg(fact_id, "fact_id", key=False)
            states = fact_states(self.backend, [fact_id])
            text_arg(fact_id, "fact_id", key=fact_id not in states)  # ``text_arg``'s ``key``
            state = check_known(states, fact_id, "forget")
            if precondition is not None:
                precondition(state)
            error = refuse("forget", state)
            if error is not None:
                raise error
            check_plain_forget(self.forget_mode, state.assert_event)
            if planned and extra and not _still_restores(self.backend, state, extra):
                extra = None  # a sweep's put-back no longer planned: the flow compensates it
            digest, kind = value_digest(
                state.assert_event.fact.value, forget_key=self.forget_key, keep_digest=keep_digest
            )
            stored, destroyed, unfound = (
                data_keys(self.backend, fact_id) if certify else ("plain", (), 0)
            )
            self.backend.ordered()  # the checks are done: stamp, seal and write in order
            before = self.backend.chain_head() if certify else None
            tx = in_order(self.backend, self.now())
            event = ForgetEvent(
                new_id(),
                tx,
                fact_id,
                actor,
                reason,
                Source(receipt_id),
                digest,
                kind,
                dict(extra or {}),
            )
            [event] = self._chain.seal(self.backend, [event])
            self.backend.forget(fact_id, Forgotten(digest, kind, tx), event)
            if before is None:
                return event, None
            after = self.backend.chain_head()
        done = Forgetting(state.assert_event, event, before, after, stored, destroyed, unfound)
        return event, done

    def check_sweep(
        self,
        before: TimeLike,
        actor: str,
        reason: str,
        space: str | None = None,
        receipt_id: str | None = None,
        keep_digest: bool = True,
    ) -> str:
        """``sweep``'s argument checks, refusing as ``sweep`` would before it touches anything
        (the custody flow checks first, then puts back what the sweep uncovers); the cutoff."""
        check_writable(self, "sweep")
        cutoff = required_time_arg(before, "before")
        _check_texts(actor, reason, receipt_id)  # refused alike with or without candidates
        bool_arg(keep_digest, "keep_digest")
        if space is not None:
            text_arg(space, "space")
        return cutoff

    @writes
    def sweep(
        self,
        *,
        before: TimeLike,
        actor: str,
        reason: str,
        space: str | None = None,
        receipt_id: str | None = None,
        keep_digest: bool = True,
        progress: Callable[[int, int], None] | None = None,
        certificates: Certify = False,
        extras: Mapping[str, Mapping[str, Any]] | None = None,
        only: Collection[str] | None = None,
    ) -> SweepResult:
        """Forget every fact learned before ``before`` (transaction time), skipping held ones.

        ``progress(done, total)`` is called after each fact (a command line's progress bar);
        ``certificates``: as ``forget``'s ``certificate``, one per forgotten fact, in the
        result's ``certificates`` (fact id to ``CertifiedForget``); ``extras``: keys to add to
        the forget event of a fact, by fact id (the stores' put-backs, ``stores.sweep_restore``);
        a ``restored`` record is left out when, by the fact's forget, the fact was retracted or
        the fact it names retracted or forgotten (the put-back it records is undone); ``only``:
        forget none but these of the facts learned before ``before`` (the custody flow's own
        listing, which it owes the stores' removals for: a fact another writer appends meanwhile,
        with a ``before`` not yet past, is left to the next sweep, not forgotten unlisted).
        A fact that stops it: its exception carries what was done before (``stopped``), as
        does the ``CertificateNotMade`` of certificates that fail at its end."""
        cutoff = self.check_sweep(before, actor, reason, space, receipt_id, keep_digest)
        extras, only = sweep_args(extras, only, progress, certificates)
        options, key = self.certifying(certificates, "certificates")
        forgotten: list[ForgetEvent] = []
        done: list[Forgetting] = []
        held: list[str] = []
        candidates = self.learned_before(cutoff, space)
        if only is not None:
            candidates = [fact for fact in candidates if fact.fact_id in only]
        try:
            with compacting(self, forgotten):  # also when stopped: compacted and announced
                for count, fact in enumerate(candidates):
                    if progress is not None:
                        progress(count, len(candidates))
                    try:
                        event, forgetting = self._forget(
                            fact.fact_id,
                            actor,
                            reason,
                            receipt_id,
                            keep_digest,
                            extra=dict(extras[fact.fact_id])
                            if extras and fact.fact_id in extras
                            else None,
                            certify=key is not None,
                            planned=True,
                        )
                    except LedgerError as exc:
                        if exc.code == "on_hold":
                            held.append(fact.fact_id)
                        elif exc.code != "already_forgotten":  # else another process swept it
                            raise
                        continue
                    forgotten.append(event)
                    if forgetting is not None:
                        done.append(forgetting)
                if progress is not None and candidates:
                    progress(len(candidates), len(candidates))
        except BaseException as exc:  # Ctrl-C too: the caller must learn what was forgotten
            # A fact stopped it: the forgets before stand, and are certified now, after their
            # compaction, as a complete sweep's are after its last (``stopped``).
            carry(
                exc,
                lambda: self._swept(forgotten, held, done, options, key),
                lambda: self._swept(forgotten, held, [], None, None),
            )
            raise
        try:
            return self._swept(forgotten, held, done, options, key)
        except CertificateNotMade as exc:  # at its end: it carries what it did, as a stop does
            setattr(exc, SWEEP_RESULT, self._swept(forgotten, held, [], None, None))
            raise

    def _swept(
        self,
        forgotten: list[ForgetEvent],
        held: list[str],
        done: list[Forgetting],
        options: CertificateOptions | None,
        key: KeyPair | None,
    ) -> SweepResult:
        """The result of a sweep, its certificates made now: one byte scan for all its values."""
        certified = {}
        if options is not None and key is not None and done:
            certified = {c.event.fact_id: c for c in self._certify(done, options, key)}
        forgotten = [handed(event, self.backend.keeps_objects) for event in forgotten]
        return SweepResult(forgotten=forgotten, held=held, certificates=certified)


__all__ = ["Certify", "LedgerForgetting"]
