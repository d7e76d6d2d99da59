"""Event-backend rule for the backend's own questions, asked directly (not through the ledger).

The ledger's reads use only part of what each question answers (it may take the first of a
list, or filter again), so a backend can answer a question wrongly and still pass every ledger
rule, until a later release of the ledger relies on that answer. This rule asks every question
of ``EventBackend`` directly, after a history with every kind of event, and compares each answer
with the in-memory reference backend holding the same events; and it looks for the value of a
forgotten fact in every answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from agent_custody_state import Ledger
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.ledger.backend import KEY_NAMES, EventBackend
from agent_custody_state.ledger.model import Event

from ..rules import rule
from .base import BackendRules

__all__ = ["QuestionRules"]

Question = Callable[[EventBackend], Any]


def _ask(method: str, *args: Any, part: int | None = None, **kw: Any) -> Question:
    """The question ``backend.<method>(*args, **kw)`` (a list if it streams; one part of a
    pair when ``part`` is given)."""

    def ask(backend: EventBackend) -> Any:
        answer = getattr(backend, method)(*args, **kw)
        if isinstance(answer, Iterator):
            answer = list(answer)
        return answer if part is None else answer[part]

    return ask


def _history(ledger: Ledger, secret: str) -> tuple[dict[str, str], dict[str, str]]:
    """Write a history with every kind of event; return its fact ids by label (as messages
    name them: a <- b <- c retracted, d supersedes b, e confirmed, held and released, f
    forgotten, g a forgotten superseder of e) and the times the filters use."""
    kw: dict[str, Any] = {"subject": "s1", "predicate": "p", "space": "org", "actor": "a"}
    a = ledger.assert_fact(value="a", **kw)
    b = ledger.assert_fact(value="b", supersedes=a.fact_id, **kw)
    c = ledger.assert_fact(value="c", supersedes=b.fact_id, **kw)
    ledger.retract(fact_id=c.fact_id, actor="x", reason="wrong")
    mid = ledger.now()
    # b has two superseders now: c (retracted) and d, in that order.
    d = ledger.assert_fact(value="d", supersedes=b.fact_id, **kw)
    e = ledger.assert_fact(**{**kw, "subject": "s2", "space": "team:x"}, value={"n": 1})
    ledger.confirm(fact_id=e.fact_id, actor="x", receipt_id="rcpt-1")
    ledger.hold(fact_id=e.fact_id, actor="x", reason="case")
    ledger.release(fact_id=e.fact_id, actor="x", reason="closed")
    f = ledger.assert_fact(**{**kw, "predicate": "q"}, value=secret)
    g = ledger.assert_fact(**{**kw, "subject": "s2", "space": "team:x"}, value=secret + "-g",
                           supersedes=e.fact_id)  # fmt: skip
    ledger.forget(fact_id=f.fact_id, actor="x", reason="gdpr")
    ledger.forget(fact_id=g.fact_id, actor="x", reason="gdpr")
    ids = {label: x.fact_id for label, x in zip("abcdefg", (a, b, c, d, e, f, g), strict=True)}
    return ids, {"mid": mid, "exact": b.tx_time}


def _questions(ids: dict[str, str], times: dict[str, str]) -> dict[str, Question]:
    """Every question, named as the failure message shows it (facts by label), with its
    arguments."""
    asked: dict[str, Question] = {}
    for label, i in [*ids.items(), ("unknown", "no-such-fact")]:
        asked[f"get_assert({label})"] = _ask("get_assert", i)
        asked[f"events_for([{label}])"] = _ask("events_for", [i])
        asked[f"superseders([{label}])"] = _ask("superseders", [i])
        asked[f"events_around([{label}])"] = _ask("events_around", [i])
        asked[f"history({label})"] = _ask("history", i)
    backwards = list(reversed(ids.values()))
    asked["events_for(every id, newest first)"] = _ask("events_for", backwards)
    asked["superseders(every id, newest first)"] = _ask("superseders", backwards)
    asked["events_around(every id, newest first)"] = _ask("events_around", backwards)
    filters: list[dict[str, str]] = [
        {},
        {"space": "org"},
        {"subject": "s1"},
        {"subject": "s2", "space": "team:x"},
        {"predicate": "q"},
        {"subject": "s1", "predicate": "p"},
        {"tx_at": "<after c's retraction>"},
        {"tx_at": "<b's txTime>"},
        {"subject": "s1", "tx_at": "<b's txTime>"},
    ]
    named = {"<after c's retraction>": times["mid"], "<b's txTime>": times["exact"]}
    before = [{"tx_before": "<after c's retraction>"}, {"tx_before": "<b's txTime>"}]
    f: dict[str, Any]
    for shown in [*filters, *before]:
        f = {k: named.get(v, v) for k, v in shown.items()}
        asked[f"find_asserts(**{shown})"] = _ask("find_asserts", **f)
    for shown in filters:
        f = {k: named.get(v, v) for k, v in shown.items()}
        asked[f"asserts_around(**{shown})[0]"] = _ask("asserts_around", part=0, **f)
        asked[f"asserts_around(**{shown})[1]"] = _ask("asserts_around", part=1, **f)
    for key in KEY_NAMES:
        asked[f"key_values({key!r})"] = _ask("key_values", key)
    asked["spaces()"] = _ask("spaces")
    asked["count()"] = _ask("count")
    asked["iter_events()"] = _ask("iter_events")
    asked["first_event()"] = _ask("first_event")
    asked["last_event()"] = _ask("last_event")
    asked["last_tx_time()"] = _ask("last_tx_time")
    return asked


def _plain(answer: Any) -> Any:
    """An answer as comparable data: events as their wire dicts, lists item by item."""
    if isinstance(answer, Event):
        return answer.to_dict()
    if isinstance(answer, list | tuple):
        return [_plain(item) for item in answer]
    return answer


def _texts(answer: Any) -> Iterable[str]:
    """Every event of an answer as JSON text (to look for a forgotten value in)."""
    if isinstance(answer, Event):
        yield answer.to_json()
    elif isinstance(answer, list | tuple):
        for item in answer:
            yield from _texts(item)


class QuestionRules(BackendRules):
    """The backend's questions, asked directly and compared with the reference."""

    __suite_root__ = True

    @rule("EB-Q-answers")
    def test_questions_answer_as_the_reference(self, ledger: Ledger) -> None:
        """Asked directly, after a history with every kind of event (a chain with a retracted
        link and a second superseder, a confirm, a hold and release, forgotten facts, one of
        them a superseder), every question of the backend (``get_assert``, ``events_for``,
        ``superseders``, ``events_around``, ``history``, ``find_asserts`` and
        ``asserts_around`` with each filter, ``key_values``, ``spaces``, ``count``,
        ``iter_events``, ``first_event``, ``last_event``, ``last_tx_time``) answers exactly as
        the in-memory reference holding the same events, and none holds a forgotten value.

        Troubleshooting: the message names the question and its arguments (facts by label:
        a <- b <- c with c retracted and d superseding b again, e confirmed, held and
        released, f forgotten, g a forgotten superseder of e) and lists each answer as
        positions in append order. Answer in append order (never by time, id or the order of
        the ids asked), whole events (every key as stored), the fact's own assert for
        ``get_assert`` (never its superseder's), every superseder of each id asked; and
        rewrite a forgotten assert wherever a copy of it is kept (a cache, a side table).
        """
        secret = f"forget-me-{uuid.uuid4()}"
        ids, times = _history(ledger, secret)
        backend = ledger.backend
        reference = MemoryBackend("memory:reference")
        with reference.transaction():
            reference.append(list(backend.iter_events()))
        order = {e.event_id: n for n, e in enumerate(reference.iter_events(), 1)}

        def show(answer: Any) -> Any:
            if isinstance(answer, Event):
                return f"{order.get(answer.event_id, '?')}:{answer.kind}"
            if isinstance(answer, list | tuple):
                return [show(item) for item in answer]
            return answer

        for question, ask in _questions(ids, times).items():
            got, want = ask(backend), ask(reference)
            assert _plain(got) == _plain(want), (
                f"EB-Q-answers: {question} answered {show(got)}; the reference answers "
                f"{show(want)} (events as position:kind in append order)"
                + ("; the same events, but not as stored" if show(got) == show(want) else "")
            )
            leaked = [text for text in _texts(got) if secret in text]
            assert not leaked, f"EB-Q-answers: {question} still holds a forgotten value"
        for text in backend.stored_events():
            stored = text.decode() if isinstance(text, bytes) else text
            assert secret not in stored, "EB-Q-answers: stored_events() holds a forgotten value"
