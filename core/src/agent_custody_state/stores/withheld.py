"""Keeping a fact's value, and URL queries, out of what a store's failure is shown as.

A vendor's error often quotes the request it refused: a FastAPI 422 carries the rejected
``input`` whole, an SDK prints the reply body with ``repr``, an HTTP client's error names the
URL with its query (a search's text). ``error_message`` puts such a text into log lines, tool
results, reports and certificates, none of which a forget reaches. ``withheld`` masks the
fact's text and each of its value's strings there, in every form a vendor or SDK quotes them
(as sent, JSON-escaped, ``repr``-escaped, URL-encoded; a quote cut short too), drops every
URL's query (``without_queries``), and bounds what is left to ``LIMIT`` characters, so one
reply echoing a megabyte neither floods a log nor a report.

The same query rule applies to the log records of the HTTP clients and the vendor SDKs
(``stores.base._Redacting``): httpx logs each request's URL at INFO, and a store's check after a
forget searches for the forgotten text with a ``GET``. So does the value rule, while a store is
sending a fact (``withholding``): an SDK logging what it sends (mem0's local ``Memory`` logs
``Creating memory with data='<the text>'``) has that text masked in the records of every
guarded logger (``stores.base.guard_logger``), whichever thread logs them. A blocking call
started under it in a worker thread (``kit.run_sync``) keeps the values masked until it returns
(``carried``): a cancelled caller stops waiting, the thread runs on and logs what it sends.

Every form is looked for in the text as given, and the quotes found are masked together: a form
never matches inside the mask another form left (``[value withheld]`` holds ``value``, ``with``,
``held``...; masking one form after another grew a text exponentially with such strings).
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from typing import Any, TypeVar
from urllib.parse import quote, quote_plus

#: What a value in a message is replaced with.
MASK = "[value withheld]"
#: The longest message shown; the rest is counted, not shown.
LIMIT = 2000
#: Strings shorter than this are not masked: they would mask ordinary words of the message.
MIN_CHARS = 4
#: A quote of at least this many characters of a longer form is masked (a cut-short echo).
CUT = 24
#: At most this many of a value's strings (the longest) are looked for.
MAX_PIECES = 256
_QUERY = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s?#'\"]*)\?[^\s#'\"]*")


def without_queries(text: str) -> str:
    """``text`` with the query of every URL in it replaced by ``***``."""
    return _QUERY.sub(r"\1?***", text)


def withheld(text: str, *values: Any) -> str:
    """``text`` without the strings in ``values`` (a fact's text as the stores received it and
    its value: see the module docstring), URL queries or more than ``LIMIT`` characters."""
    text = _masked(without_queries(text), _forms(values))
    if len(text) > LIMIT:
        text = f"{text[:LIMIT]}… ({len(text) - LIMIT} more characters)"
    return text


#: The forms of the values stores are sending now (``withholding``), with how many sends each.
_SENDING: Counter[str] = Counter()
_SENDING_LOCK = threading.Lock()  # records are logged by any thread, SDKs use thread pools
#: The forms this task's (or thread's) open ``withholding`` blocks hold, for ``carried``.
_HELD: ContextVar[frozenset[str]] = ContextVar("withheld_held", default=frozenset())
T = TypeVar("T")


@contextmanager
def withholding(*values: Any) -> Iterator[None]:
    """While open, the records of every guarded logger show ``values`` (a fact's text as the
    store sends it, the fact's value) masked as ``withheld`` masks them. Process-wide: a vendor
    SDK logs from threads of its own. Open it around a store's calls that send the fact; a
    blocking call it runs in a worker thread (``kit.run_sync``) keeps them masked until it
    returns, even when this block is left first (a cancelled caller: ``carried``)."""
    forms = _forms(values)
    token = _HELD.set(_HELD.get() | forms)
    try:
        with _sending(forms):
            yield
    finally:
        with suppress(ValueError):  # left in another context than opened in: nothing to undo
            _HELD.reset(token)


def carried(func: Callable[[], T]) -> Callable[[], T]:
    """``func``, to run in a worker thread, holding the forms the caller's open
    ``withholding`` blocks hold (``kit.run_sync``) for as long as it runs: the thread of a
    blocking call is not cancellable, and what it logs after its caller gave up is masked too."""
    forms = _HELD.get()
    if not forms:
        return func

    def holding() -> T:
        with _sending(forms):
            return func()

    return holding


@contextmanager
def _sending(forms: set[str] | frozenset[str]) -> Iterator[None]:
    """Count ``forms`` as being sent (``_SENDING``) while open."""
    with _SENDING_LOCK:
        _SENDING.update(forms)
    try:
        yield
    finally:
        with _SENDING_LOCK:
            _SENDING.subtract(forms)
            for form in forms:
                if _SENDING[form] <= 0:
                    del _SENDING[form]


def without_sending(text: str) -> str:
    """``text`` with the values being sent now (``withholding``) masked."""
    with _SENDING_LOCK:
        if not _SENDING:
            return text
        forms = list(_SENDING)
    return _masked(text, forms)


def _masked(text: str, forms: Iterable[str]) -> str:
    """``text`` with every quote of each form (``_quotes``) masked; quotes that overlap or
    touch masked as one. One pass over ``text`` as given: a mask is never looked into."""
    spans = sorted(span for form in forms for span in _quotes(text, form))
    if not spans:
        return text
    out: list[str] = []
    start, end = spans[0]
    shown = 0
    for at, until in spans[1:]:
        if at <= end:
            end = max(end, until)
            continue
        out += [text[shown:start], MASK]
        shown, start, end = end, at, until
    out += [text[shown:start], MASK, text[end:]]
    return "".join(out)


def _quotes(text: str, form: str) -> Iterator[tuple[int, int]]:
    """The spans of ``text`` quoting ``form``: whole, or cut short after ``CUT`` characters
    or more."""
    head = form[: min(len(form), CUT)]
    at = text.find(head)
    while at >= 0:
        end = at + len(head)
        while end < len(text) and end - at < len(form) and text[end] == form[end - at]:
            end += 1
        yield at, end
        at = text.find(head, end)


def _forms(values: Any) -> set[str]:
    pieces = sorted({p for p in _strings(values) if len(p) >= MIN_CHARS}, key=len, reverse=True)
    forms: set[str] = set()
    for piece in pieces[:MAX_PIECES]:
        forms |= {
            piece,
            json.dumps(piece)[1:-1],
            json.dumps(piece, ensure_ascii=False)[1:-1],
            repr(piece)[1:-1],
            quote_plus(piece),
            quote(piece, safe=""),
        }
    return {f for f in forms if len(f) >= MIN_CHARS}


def _strings(value: Any) -> Iterator[str]:
    """Every string in ``value``: keys and leaves, at any depth."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            for key, inner in item.items():
                stack += [key, inner]
        elif isinstance(item, (list, tuple)):
            stack += list(item)
