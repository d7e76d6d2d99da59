"""Small helpers shared by write-through store adapters (mem0, Zep, Letta, Cognee, ...).

Every vendor adapter needs the same few things, and none should carry its own copy:

- ``run_sync``: call a blocking SDK method without blocking the server's event loop.
- ``call_sdk``: the same, with whatever the SDK raises turned into a ``StoreError`` that names
  the store and the operation (the orchestration reports it as the store's refusal).
- ``secret_from_env``: read a credential from a *named* environment variable, failing with
  that name when it is unset (config files hold variable names, never secrets).
- ``poll``: wait, within a bound, for something asynchronous on the vendor side (a pending
  add, a delete task) to settle.
- ``holdable_text`` / ``original_text``: a string as a store can hold it (U+0000 and lone
  surrogates, which the ledger accepts in values, actors and receipt ids, sent as the string's
  JSON text) and back (``stores.holdable``). ``fact_text`` and ``custody_metadata`` apply it
  already; an adapter sending a value's strings in a shape of its own uses it on them.
- ``ConfigPath``: the type of a settings field that is a file or folder path. A relative path
  written in the config file is resolved against the file's folder, as the ledger's is (a field
  typed ``pathlib.Path`` is treated the same way).

Nothing here imports a vendor SDK, so plugins may import it from their entry-point modules.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable
from typing import Annotated, ParamSpec, TypeVar
from urllib.parse import urlsplit, urlunsplit

import anyio

from agent_custody_state.stores.base import StoreError, register_secret
from agent_custody_state.stores.holdable import holdable_text, original_text
from agent_custody_state.stores.withheld import carried

__all__ = [
    "PATH_SETTING",
    "ConfigPath",
    "call_sdk",
    "holdable_text",
    "original_text",
    "poll",
    "run_sync",
    "secret_from_env",
]


class _PathSetting:
    """The marker ``ConfigPath`` carries (pydantic keeps unknown ``Annotated`` metadata)."""

    def __repr__(self) -> str:
        return "PATH_SETTING"


PATH_SETTING = _PathSetting()
#: A store setting that names a file or folder: ``path: ConfigPath | None = None``.
ConfigPath = Annotated[str, PATH_SETTING]

P = ParamSpec("P")
T = TypeVar("T")


async def run_sync(func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a blocking call in a worker thread and return its result (exceptions propagate).

    The thread is not cancellable, and a cancelled caller waits for it (the cancel is taken
    once the call returns): no vendor call goes on unseen after its caller gave up, and no
    deadline (``move_on_after``) is shorter than the call. Bound the call itself with the
    SDK's own timeout. The values the caller is sending
    (``withholding``) stay masked in the logs until the call ends (``withheld.carried``).
    """
    return await anyio.to_thread.run_sync(carried(functools.partial(func, *args, **kwargs)))


async def call_sdk(
    store: str, what: str, func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
) -> T:
    """``run_sync``, raising ``StoreError(store, "<what> failed: <Type>: <message>")`` on error.

    Handle the outcomes that are not failures (a 404 on a delete, say) inside ``func``: by the
    time an exception reaches here it is reported as the store refusing ``what``.
    """
    try:
        return await run_sync(func, *args, **kwargs)
    except StoreError:
        raise
    except Exception as exc:
        detail = str(exc).strip()
        kind = type(exc).__name__
        raise StoreError(
            store, f"{what} failed: {kind}: {detail}" if detail else f"{what} failed: {kind}"
        ) from exc


def secret_from_env(store: str, variable: str | None, *, what: str = "API key") -> str | None:
    """The value of the environment variable ``variable`` (``None`` when none is configured).

    A variable that is named but unset or empty is a configuration error: it raises
    ``StoreError`` naming the store and the variable, so the server fails at startup with a
    message the operator can act on rather than with a 401 at the first write. The value (and
    a password inside it) is kept out of every ``StoreError`` from then on (``register_secret``).
    """
    if not variable:
        return None
    value = os.environ.get(variable, "")
    if not value.strip():
        raise StoreError(
            store, f"environment variable {variable} is not set (it should hold the {what})"
        )
    register_secret(value)
    return value


async def poll(
    check: Callable[[], Awaitable[bool]],
    *,
    attempts: int | None = 10,
    delay: float = 0.1,
    factor: float = 2.0,
    max_delay: float = 2.0,
    timeout: float | None = None,
) -> bool:
    """Call ``check`` until it returns true, at most ``attempts`` times; report the last answer.

    Waits ``delay`` before the second call and multiplies the wait by ``factor`` (capped at
    ``max_delay``) each time, so the total wait is bounded and known in advance.

    ``timeout`` (seconds) bounds the wait by time instead of, or as well as, by count: no wait
    starts that would end past it, except a last one shortened to end exactly at it, so a
    vendor gets the whole allowance. ``attempts=None`` leaves the time as the only bound.
    """
    if attempts is None and timeout is None:
        raise ValueError("poll needs attempts, timeout or both")
    deadline = None if timeout is None else anyio.current_time() + max(0.0, timeout)
    wait = delay
    attempt = 0
    while True:
        if attempt:
            if deadline is not None:
                left = deadline - anyio.current_time()
                if left <= 0:
                    return False
                wait = min(wait, left)
            await anyio.sleep(wait)
            wait = min(wait * factor, max_delay)
        if await check():
            return True
        attempt += 1
        if attempts is not None and attempt >= max(1, attempts):
            return False


def public_url(url: str) -> str:
    """``url`` without userinfo (a password), query or fragment (a token), with its scheme and
    host lower-cased: the part of a store's address its ``where`` may name (``Store.where``)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = parts.port
    except ValueError:  # a port that is not a number names no place of its own
        port = None
    netloc = (f"[{host}]" if ":" in host else host) + (f":{port}" if port else "")
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), "", ""))
