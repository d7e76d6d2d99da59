"""The memory service: one call in, one result out, with trust, checks and signing around it.

Transport-independent: the MCP server (``app.py``) hands it the tool name, the arguments, the
call's ``_meta`` and the caller's role; it answers a ``ToolResult``. The order of checks is fixed:
the gateway requirement (as the original), then unknown tool, then what a direct caller may not
call at all (``policy.py``; a caller who may not call learns nothing about argument rules), then
the arguments, then the tool itself. Every result of a call that carried a
(believed) receipt id is signed when the server has a key, refusals included.

Every call leaves one access-log line (logger ``agent_custody_state.access``, level INFO): the
tool, the caller's role, the outcome (``ok``, ``error``, or ``partial``: the ledger changed but a
store did not) and the milliseconds taken. Never arguments, values, ``_meta`` or tokens: the
line says that a call happened and how it went, the ledger says what it did.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agent_custody_state.ledger.backend import EventBackendError
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.retention import RetentionPolicy
from agent_custody_state.server.appender import Appender
from agent_custody_state.server.evidence import EvidenceError
from agent_custody_state.server.failures import internal_error, log_internal_error
from agent_custody_state.server.handlers import HANDLERS
from agent_custody_state.server.limits import ValueLimits, check_value, depth_problem
from agent_custody_state.server.policy import refusal
from agent_custody_state.server.results import ToolResult
from agent_custody_state.server.scopes import SpaceScope
from agent_custody_state.server.signing import SigningIdentity
from agent_custody_state.server.tools import SCHEMAS
from agent_custody_state.server.trust import (
    GATEWAY_REQUIRED,
    SIGNATURE_KEY,
    CallContext,
    Role,
    call_context,
)
from agent_custody_state.server.validation import ArgumentErrors, validate_arguments
from agent_custody_state.server.worker import LedgerWorker, worker_for
from agent_custody_state.stores import Store, StoreSet, StoreWriteError, VerifyPolicy
from agent_custody_state.stores.archive import CertificateArchive, archive_of
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.outbox import Outbox

log = logging.getLogger(__name__)
access_log = logging.getLogger("agent_custody_state.access")

_REFUSALS = (LedgerError, EvidenceError, StoreWriteError)


def verify_policy(verify: VerifyPolicy | Mapping[str, Any] | None) -> VerifyPolicy:
    """Accept a ``VerifyPolicy`` or ``{attempts, delay_ms | delayMs | delay (seconds)}``."""
    if verify is None or isinstance(verify, VerifyPolicy):
        return verify or VerifyPolicy()
    attempts = int(verify.get("attempts", 3))
    if "delay_ms" in verify or "delayMs" in verify:
        delay = float(verify.get("delay_ms", verify.get("delayMs", 200))) / 1000
    else:
        delay = float(verify.get("delay", 0.2))
    if attempts < 1 or delay < 0:
        raise ValueError("verify: attempts must be at least 1 and the delay not negative")
    return VerifyPolicy(attempts=attempts, delay=delay)


@dataclass
class MemoryService:
    """Everything a tool call needs; shared by all calls, holding no per-call state."""

    ledger: Ledger
    stores: StoreSet = field(default_factory=StoreSet)
    retention: RetentionPolicy | None = None
    require_gateway: bool = True
    identity: SigningIdentity | None = None
    worker: LedgerWorker = field(default_factory=LedgerWorker)
    limits: ValueLimits = field(default_factory=ValueLimits)
    #: owed store removals kept across a crash (``stores.outbox``); None: not kept
    outbox: Outbox | None = None
    #: every erasure certificate issued is kept here (``stores.archive``); None: not kept
    certificates: CertificateArchive | None = None
    appender: Appender = field(init=False)
    custody: Custody = field(init=False)
    #: tool calls being served now (an HTTP stop lets them finish and be answered: drain.py)
    in_flight: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.appender = Appender(self.ledger, self.worker)
        self.custody = Custody(
            self.ledger,
            self.stores,
            retention=self.retention,
            run=self.worker.run,
            append=self.appender.assert_fact,
            # Erasure certificates are signed with the key that signs results.
            certificate_key=self.identity.private_key if self.identity is not None else None,
            outbox=self.outbox,
            certificates=self.certificates,
        )

    @classmethod
    def build(
        cls,
        ledger: Ledger,
        *,
        require_gateway: bool = True,
        stores: Sequence[Store] | StoreSet = (),
        identity: Any = None,
        retention: str | Mapping[str, str] | RetentionPolicy | None = None,
        verify: VerifyPolicy | Mapping[str, Any] | None = None,
        worker: LedgerWorker | None = None,
        limits: ValueLimits | None = None,
        outbox: Outbox | str | os.PathLike[str] | None = None,
        certificates: CertificateArchive | str | os.PathLike[str] | None = None,
    ) -> MemoryService:
        """Normalise the ``create_memory_server`` options; bad ones fail here, at startup."""
        if isinstance(stores, StoreSet):
            store_set = stores
            if verify is not None:
                store_set.verify = verify_policy(verify)
        else:
            store_set = StoreSet(list(stores), verify_policy(verify))
        if not isinstance(retention, RetentionPolicy):
            retention = RetentionPolicy.parse(
                dict(retention) if isinstance(retention, Mapping) else retention
            )
        return cls(
            ledger=ledger,
            stores=store_set,
            retention=retention,
            require_gateway=require_gateway,
            identity=SigningIdentity.load(identity) if identity is not None else None,
            worker=worker or worker_for(ledger),
            limits=limits or ValueLimits(),
            outbox=Outbox.of(outbox, ledger),  # a path: the ledger's lock bound
            certificates=_archive(certificates, identity),
        )

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        meta: Mapping[str, Any] | None,
        role: Role,
        spaces: SpaceScope | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> ToolResult:
        """Serve one tool call from a caller of ``role`` (``gateway``, ``direct`` or
        ``reader``), limited to ``spaces`` (None: every space); ``progress`` hears a sweep's
        steps (``progress.py``)."""
        started = time.perf_counter()
        context = call_context(meta, role, spaces)
        if progress is not None:
            context = replace(context, progress=progress)
        self.in_flight += 1
        try:
            result = await self._dispatch(name, arguments, context)
        finally:
            self.in_flight -= 1
        if self.identity is not None and context.receipt_id is not None:
            result.meta[SIGNATURE_KEY] = self.identity.sign_result(
                receipt_id=context.receipt_id,
                tool=name,
                content=result.content(),
                is_error=result.is_error,
            )
        _log_access(name, role, result, started)
        return result

    async def _dispatch(
        self, name: str, arguments: Mapping[str, Any] | None, context: CallContext
    ) -> ToolResult:
        # The gateway requirement first, as the original: a call without a receipt is refused
        # whatever tool it names (SPEC 4.1).
        if self.require_gateway and context.receipt_id is None:
            return ToolResult.error(GATEWAY_REQUIRED)
        handler = HANDLERS.get(name)
        if handler is None:
            return ToolResult.error(f"unknown tool {name}")
        refused = refusal(name, context)
        if refused is not None:
            return ToolResult.error(refused)
        try:
            args = validate_arguments(SCHEMAS[name], arguments)
        except ArgumentErrors as exc:
            return ToolResult.error(str(exc))
        try:
            if name == "memory.write":  # before the ledger or any store spends time on it
                await check_value(args["value"], self.limits)
                deep = depth_problem(args["value"], self.limits.max_depth)
                if deep is not None:
                    return ToolResult.error(str(ArgumentErrors([deep])))
            return await handler(self, context, args)
        except ArgumentErrors as exc:  # found while serving (an evidence path)
            return ToolResult.error(str(exc))
        except _REFUSALS as exc:
            code = getattr(exc, "code", None)
            return ToolResult.error(str(exc), code if isinstance(code, str) else None)
        except EventBackendError as exc:
            log.error("%s failed in the event store: %s", name, exc)
            return ToolResult.error(str(exc))
        except Exception as exc:  # a bug must cost one call, not the connection
            log_internal_error(log, name, exc, arguments)
            return ToolResult.error(internal_error(name, exc))

    def close(self) -> None:
        self.worker.close()


def outcome(result: ToolResult) -> str:
    """``ok``, ``error``, or ``partial`` (an error result carrying the JSON of what was done)."""
    if not result.is_error:
        return "ok"
    return "partial" if len(result.texts) > 1 else "error"


def _log_access(name: str, role: Role, result: ToolResult, started: float) -> None:
    if not access_log.isEnabledFor(logging.INFO):
        return
    # The tool name is caller-chosen text: an unknown one is not echoed into the log.
    tool = name if name in HANDLERS else "(unknown tool)"
    ms = round((time.perf_counter() - started) * 1000, 1)
    access_log.info(
        "%s %s %s %.1fms",
        tool,
        role,
        outcome(result),
        ms,
        extra={"tool": tool, "role": role, "outcome": outcome(result), "ms": ms},
    )


def _archive(
    certificates: CertificateArchive | str | os.PathLike[str] | None, identity: Any
) -> CertificateArchive | None:
    """``certificates`` as an archive, ready; refused (``ValueError``) without a signing key."""
    archive = archive_of(certificates)
    if archive is not None:
        if identity is None:
            raise ValueError("certificates needs identity: the key that signs certificates")
        archive.prepare()
    return archive
