"""What a ``Ledger`` takes from its caller, and what it never hands out.

Texts are kept as plain ``str`` (``arguments.text_arg``): a caller's subclass (a
``class Role(str, Enum)`` member) kept as given read back as the caller's object in the writing
process and as plain text everywhere else. A read's key of another type is refused naming the
parameter: ``get(5)`` answered None and ``as_of(space=1)`` an empty list, as if the ledger held
nothing. ``key_values``, ``sweep``'s other arguments and ``import_events`` name a
wrong argument rather than fail inside (a ``KeyError``, an ``AttributeError``). A ``Ledger`` is
not copied or pickled (``Unshared``): it owns an open backend, its locks and files
(docs/decisions.md, "Arguments a user gets wrong").
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, NoReturn, cast

from agent_custody_state.ledger.arguments import FORGET_WIRE_KEYS, extra_arg, text_arg
from agent_custody_state.ledger.backend import KEY_NAMES, KeyName
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.model import Event, _EventBase


class Unshared:
    """Refuses ``pickle``, ``copy.copy`` and ``copy.deepcopy`` with a message saying what to do.

    Pickling failed deep inside ("cannot pickle '_thread.lock' object"), and ``copy.copy``
    made a twin sharing the original's backend and life: closing the twin closed the original
    half-way (writes refused, reads still served by a released backend)."""

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        raise TypeError(
            f"a {type(self).__name__} cannot be copied or pickled: it holds an open backend, "
            "its locks and files; open another one on the same location "
            f"({type(self).__name__}(ledger.location, ...)) where one is needed, in this "
            "process or another"
        )


def texts(receipt_id: object, fact_id: object, actor: object, *reason: object) -> list[Any]:
    """The text arguments of a retract, confirm, hold or release, checked and as plain text:
    ``[receipt_id, fact_id, actor, *reason]``. ``receipt_id`` is None or text (SPEC 1.1's
    receiptId is text or null); the fact id's content is checked under the write lock
    (``Ledger._state``: an id the ledger holds is not held to the rules of a new key)."""
    plain = [text_arg(actor, "actor", empty_ok=True)]
    plain.extend(text_arg(value, "reason", empty_ok=True) for value in reason)
    receipt = None if receipt_id is None else text_arg(receipt_id, "receipt_id", empty_ok=True)
    return [receipt, text_arg(fact_id, "fact_id", empty_ok=True, key=False), *plain]


def read_key(value: object, name: str) -> str:
    """A read's key (a fact id, subject, predicate or space), which must be text. Its content
    is not held to the write rules: a key no fact can have finds nothing."""
    if not isinstance(value, str):
        raise LedgerError(f"{name} must be a string, not {type(value).__name__}", field=name)
    return value


def read_keys(**values: object) -> None:
    """``read_key`` for each optional key given (None: not filtered on)."""
    for name, value in values.items():
        if value is not None:
            read_key(value, name)


def key_values_args(key: object, prefix: object, limit: object) -> tuple[KeyName, str, int]:
    """``key_values``'s arguments: a key name of ``KEY_NAMES``, a text prefix, a count from 0
    (a misspelt key was a ``KeyError`` from the backend's index, a number a ``TypeError``)."""
    if key not in KEY_NAMES or not isinstance(key, str):
        names = ", ".join(KEY_NAMES)
        raise LedgerError(f"key must be one of {names}, not {key!r:.40}", field="key")
    prefix = read_key(prefix, "prefix")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise LedgerError("limit must be a whole number from 0", field="limit")
    return cast(KeyName, str.__str__(key)), prefix, limit


def sweep_callbacks(progress: object, certificates: object) -> None:
    """``sweep``'s ``progress`` (None or a callable: ``progress=5`` was Python's own
    ``TypeError`` from inside the loop) and ``certificates`` (as ``forget``'s ``certificate``:
    a bool, None or ``CertificateOptions``, ``certificate.options_of``; any other value was
    taken for its truth, so ``"no"`` asked for certificates), refused up front naming the
    parameter, before anything is forgotten."""
    from agent_custody_state.ledger.certificate import options_of

    if progress is not None and not callable(progress):
        raise LedgerError(
            f"progress must be None or a function to call with the sweep's progress; got "
            f"{progress!r:.40}",
            field="progress",
        )
    options_of(certificates, "certificates")


def sweep_args(
    extras: object, only: object, progress: object = None, certificates: object = False
) -> tuple[dict[str, dict[str, Any]], Collection[str] | None]:
    """``sweep``'s ``extras`` (fact id to an event's ``extra``, each as ``extra_arg``) and
    ``only`` (fact ids, not one text: a string's substrings matched); ``progress`` and
    ``certificates`` checked (``sweep_callbacks``)."""
    sweep_callbacks(progress, certificates)
    if extras is not None and not isinstance(extras, Mapping):
        raise LedgerError(
            f"extras must map fact ids to extra keys, not a {type(extras).__name__}",
            field="extras",
        )
    kept = {
        read_key(f, "extras"): extra_arg(e, FORGET_WIRE_KEYS) for f, e in (extras or {}).items()
    }
    if only is not None and (isinstance(only, str) or not isinstance(only, Collection)):
        raise LedgerError(
            f"only must be a collection of fact ids, not a {type(only).__name__}", field="only"
        )
    return kept, only


def import_args(events: object, batch_size: object) -> list[Event]:
    """``import_events``'s events (``Event`` objects, as ``export()`` yields: a wire dict was
    an ``AttributeError`` deep in the check) and batch size (a whole number from 1)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise LedgerError("batch_size must be a whole number from 1", field="batch_size")
    if isinstance(events, str | bytes | Mapping) or not isinstance(events, Iterable):
        raise LedgerError(f"events must be events, not a {type(events).__name__}", field="events")
    listed = list(events)
    for position, event in enumerate(listed, 1):
        if not isinstance(event, _EventBase):
            raise LedgerError(
                f"event {position}: a {type(event).__name__}, not an Event (a wire dict is read "
                "with agent_custody_state.ledger.model.event_from_dict)",
                field="events",
            )
    return listed
