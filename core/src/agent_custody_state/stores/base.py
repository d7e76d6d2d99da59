"""The ``Store`` protocol every write-through adapter implements, and what each store receives.

A store is a retrieval system a team already runs (mem0, Zep, pgvector, ...). Adapters implement
``put`` and ``remove`` (and, to have removals verified, ``verify_removed``; to have the copy a
failed put may have left found and removed, ``held_ids``; to refuse a fact before any store is
written, ``refusal``); the core, not a pluggy fan-out, drives them (``storeset`` and
``flows``), because custody needs a fixed order and a defined outcome on failure (SPEC 4.2, 4.3,
6).

Store methods are ``async`` so network stores never block the server's event loop; an adapter over
a blocking SDK runs its calls in a worker thread (``kit.run_sync``).
"""

from __future__ import annotations

import inspect
import logging
import re
import threading
from typing import Any, Literal, Protocol, runtime_checkable
from urllib.parse import unquote, urlsplit

from agent_custody_state.canonical import js_json
from agent_custody_state.ledger.model import Fact
from agent_custody_state.stores.holdable import holdable_text
from agent_custody_state.stores.withheld import withheld, without_queries, without_sending

Verification = Literal["verified", "stillIndexed", "unverified", "failed"]


#: Credentials read through ``kit.secret_from_env``, and the passwords inside them: never shown.
_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()  # stores are built while other stores' calls raise errors
_PASSWORD_PARAM = re.compile(r"password\s*=\s*('(?:[^'\\]|\\.)*'|[^\s&]+)", re.IGNORECASE)
#: The password of a URL's userinfo (``scheme://user:password@host``), wherever a URL appears.
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]*):[^\s/?#]*@")


def register_secret(value: str) -> None:
    """Keep ``value`` out of every ``StoreError`` (and so out of reports and the store set's
    log lines) from now on; so too the password inside it when it is a connection URL or
    string (drivers quote those back in parse errors, e.g. libpq's ``invalid percent-encoded
    token: "<password>"``)."""
    fragments = {value}
    try:
        password = urlsplit(value).password
    except ValueError:
        password = None
    if password:
        fragments |= {password, unquote(password)}
    for match in _PASSWORD_PARAM.finditer(value):
        fragments |= {match.group(1), match.group(1).strip("'")}
    with _SECRETS_LOCK:
        _SECRETS.update(f for f in fragments if f)


def redact(text: str) -> str:
    """``text`` with every registered secret, and the password of every URL in it (a store's
    ``host`` or ``base_url`` given as ``https://user:password@proxy``), replaced by ``***``."""
    with _SECRETS_LOCK:
        secrets = sorted(_SECRETS, key=len, reverse=True)
    for secret in secrets:
        text = text.replace(secret, "***")
    return _URL_PASSWORD.sub(r"\1:***@", text)


class _Redacting(logging.Filter):
    """Applies ``redact``, ``without_queries`` and ``without_sending`` to a log record: httpx
    logs every request's URL at INFO, userinfo (a password) and query (a search's text: a
    store's check after a forget searches for the forgotten value) included, and an SDK may log
    the text it sends (``withheld.withholding``). A Stainless SDK's ``Request options`` record
    (DEBUG) is cut to the method and URL: it carries the request's body and query.

    It never raises: a filter's exception reaches the code that logged (an SDK's call would
    fail). A record whose message cannot be built (arguments that do not fit it, an argument
    whose ``str`` raises) keeps its text, masked, without its arguments, which a handler's
    "Logging error" report would print as they are."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == "Request options: %s":  # one mapping: logging keeps it as ``args``
            options = record.args if isinstance(record.args, dict) else {}
            record.args = ({k: options.get(k) for k in ("method", "url")},)
        try:
            message = record.getMessage()
        except Exception as exc:
            try:
                text = str(record.msg)
            except Exception:
                text = "(a message that could not be shown)"
            reason = type(exc).__name__
            record.msg = f"{_cleaned(text)} (its arguments are not shown: {reason})"
            record.args = None
            return True
        clean = _cleaned(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


def _cleaned(message: str) -> str:
    """A log record's message without secrets, URL queries or the values being sent."""
    return without_sending(without_queries(redact(message)))


_REDACTING = _Redacting()


def guard_logger(name: str) -> None:
    """Keep registered secrets, URL passwords, URL queries, request bodies and the values
    being sent (``withheld.withholding``) out of the records of the logger ``name`` (a vendor
    SDK's that logs its requests). A logger's filter sees only its own records, not those of
    the loggers below it: guard each logger that logs."""
    logger = logging.getLogger(name)
    if _REDACTING not in logger.filters:
        logger.addFilter(_REDACTING)


for _name in ("httpx", "httpcore"):  # the HTTP clients every vendor SDK here runs on
    guard_logger(_name)


class StoreError(Exception):
    """A store refused or failed an operation; ``store`` names it. Registered secrets are
    removed from the message (``register_secret``)."""

    def __init__(self, store: str, message: str) -> None:
        message = redact(message)
        super().__init__(f"{store}: {message}")
        self.store = store
        self.message = message


@runtime_checkable
class Store(Protocol):
    """What a write-through store implements. ``verify_removed``, ``held_ids`` and
    ``refusal`` are optional.

    ``async def verify_removed(self, external_id: str, fact: Fact) -> bool``: true when the
    store no longer returns the fact, under ``external_id`` or any other id (SPEC 4.3).

    ``async def held_ids(self, fact: Fact) -> list[str]``: the store's own ids (each one
    ``remove`` accepts) of every copy it holds whose custody metadata has ``factId ==
    fact.fact_id``; ``[]`` when it holds none. Raise when it cannot tell (a vendor error): an
    empty list is a promise. Use only ``fact.fact_id`` and ``fact.space``, never the value or
    text: a cleanup finished from the outbox has neither (``orphans``). The core asks it after a
    ``put`` that raised (a timeout after the vendor stored the fact, a connection cut before
    the answer) and removes what it names, so no copy is left that no ledger event records.

    ``def refusal(self, fact: Fact) -> str | None`` (plain or ``async``): why this store cannot
    hold ``fact`` (a limit its ``put`` refuses: a size cap, a name the vendor forbids), or
    None. Answered from the fact and the settings alone, without a network call. The store set
    asks every store before the first ``put`` (``refusal_of``): a reason fails the write naming
    the store before any store is written, so nothing is compensated or owed. ``put`` refuses
    what it names (call the same check), and a fact it names is one ``put`` would refuse.

    ``where: str`` (an attribute or property, optional): a short, stable text naming the
    container this store's copies go into, built from its settings without a network call,
    e.g. ``https://api.getzep.com graph:support`` or
    ``postgresql://db.internal:5432/app table:public.memories``. Never a secret: no password,
    API key or token, no URL userinfo or query. The core records it with each copy (the fact's
    ``externalWhere``, a put-back's ``restored`` record, an outbox entry) and refuses to remove
    or check a copy recorded at another place than the store's current one (``where``): that
    store is reported ``failed``, naming both places, so a moved store never yields a false
    ``verified``. Stores writing to different containers must give different texts; a store
    without it is removed and checked as before.

    ``residual`` (an attribute or property, optional): the places a copy this store removed
    (and verified removed) may still exist, and until when, as ``{"where": ..., "until": ...}``
    texts from its settings (its database's old row versions and WAL, the vendor's backups and
    history, what it derived from the text, the embedding model's request logs; helpers in
    ``stores.residual``). An erasure certificate lists them beside the ledger's own; a store
    without them is listed as not having declared any. Never a secret.

    ``settle_seconds: float`` (an attribute or property, optional, default 0): how long after
    a ``put`` it did not see answered (a timeout, a dropped connection, a 5xx) the vendor may
    still store that copy, so that ``held_ids`` cannot promise "none" before. In the process
    that sent it the store itself raises from ``held_ids`` meanwhile (``stores.unanswered``);
    across a restart ``resume`` keeps the outbox's cleanup of that put owed until this long
    after the entry was written (``orphan_resume``), removing any copy it finds meanwhile.
    """

    name: str

    async def put(self, fact: Fact) -> str:
        """Write the fact (text + custody metadata); return the store's own id for it."""

    async def remove(self, external_id: str, fact: Fact) -> None:
        """Remove what ``put`` wrote; removing something already gone is not an error."""


def can_verify(store: Store) -> bool:
    return callable(getattr(store, "verify_removed", None))


def can_find_held(store: Store) -> bool:
    """Whether a store can name its copies of a fact by the fact id (``held_ids``)."""
    return callable(getattr(store, "held_ids", None))


def can_refuse(store: Store) -> bool:
    """Whether a store can tell, before any put, that it cannot hold a fact (``refusal``)."""
    return callable(getattr(store, "refusal", None))


async def refusal_of(store: Store, fact: Fact) -> str | None:
    """The store's reason not to hold ``fact`` (``Store.refusal``), redacted; None when it has
    none or cannot tell. A check that raises, or answers anything but a non-empty text or None,
    is a refusal naming what it did: a faulty check stops the write before any store is written,
    as a faulty ``put`` stops it after."""
    if not can_refuse(store):
        return None
    try:
        answer = store.refusal(fact)  # type: ignore[attr-defined]
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception as exc:
        return f"its check before the put failed: {error_message(exc, fact)}"
    if answer is None:
        return None
    if isinstance(answer, str) and answer.strip():
        return redact(answer)
    return redact(f"refusal answered {answer!r}, not a reason or None")


def verifies_without_value(store: Store | None) -> bool:
    """Whether a store declares (``verify_without_value = True``) that its ``verify_removed``
    needs no value: it checks by the external id and the fact id, not by searching the text.
    The outbox finishes a forget's removal without the value (``outbox``); any other store's
    check is then not asked (``unverified``)."""
    if store is None or getattr(store, "verify_without_value", False) is not True:
        return False
    return can_verify(store)


def settle_seconds_of(store: Store) -> float:
    """How long a ``put`` the store did not see answered may still land (``Store.settle_seconds``):
    0 for a store that does not say, or says something other than a number > 0."""
    try:
        value = getattr(store, "settle_seconds", 0)
    except Exception:  # a property that fails: as if it did not say
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value) if value > 0 else 0.0  # NaN too: not > 0


def fact_text(fact: Fact) -> str:
    """The text every store receives: ``"<subject> <predicate>: <value>"`` (SPEC 6).

    A string value holding U+0000 or a lone surrogate, which no store can hold as text, is
    given as its JSON text, as a value of another type is (``holdable.holdable_text``)."""
    value = holdable_text(fact.value) if isinstance(fact.value, str) else js_json(fact.value)
    return f"{fact.subject} {fact.predicate}: {value}"


def custody_metadata(fact: Fact) -> dict[str, Any]:
    """The custody metadata every store keeps beside the text (SPEC 6). An actor or receipt id
    holding U+0000 or a lone surrogate is given as its JSON text (``holdable.holdable_text``):
    the keys (fact id, space) never hold either."""
    actor, receipt = fact.actor, fact.source.receipt_id
    return {
        "factId": fact.fact_id,
        "space": fact.space,
        "actor": holdable_text(actor) if isinstance(actor, str) else actor,
        "provenance": fact.provenance,
        "receiptId": holdable_text(receipt) if isinstance(receipt, str) else receipt,
        "validFrom": fact.valid_from,
        "source": "agent-custody",
    }


def mirrors(store: Store) -> bool:
    """Whether a store mirrors the present (the default) rather than only accumulating."""
    return getattr(store, "mirror", True) is not False


def error_message(exc: BaseException, fact: Fact | None = None) -> str:
    """A store's failure for a log line or a report: the exception's message, as the
    original's tool JSON gives it (SPEC 4.3's texts), its type only when it has none; without
    ``fact``'s value (a vendor's error quoting the request), URL queries, or more than
    ``withheld.LIMIT`` characters (``stores.withheld``)."""
    message = exc.message if isinstance(exc, StoreError) else redact(str(exc) or type(exc).__name__)
    return withheld(message, *(() if fact is None else (fact_text(fact), fact.value)))
