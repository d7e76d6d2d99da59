"""What the security tests share: the server's tokens and forget key, how it is started, and the
scan for secrets in anything it says.

Each token is a fresh random string per test run, so finding one in an output can only be a leak.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

GATEWAY = "gw-" + uuid.uuid4().hex
DIRECT = "direct-" + uuid.uuid4().hex
FORGET_KEY = "fk-" + uuid.uuid4().hex
#: The environment the server reads its secrets from, and the flags naming those variables.
ENV = {"SEC_GW": GATEWAY, "SEC_DIRECT": DIRECT, "SEC_FORGET": FORGET_KEY}
SERVE = [
    "--token-env",
    "SEC_GW",
    "--direct-token-env",
    "SEC_DIRECT",
    "--forget-key-env",
    "SEC_FORGET",
]


def run(coro: Any) -> Any:
    """Drive one async scenario to its end from a synchronous test."""
    return asyncio.run(coro)


def assert_no_secrets(text: str, where: str, extra: tuple[str, ...] = ()) -> int:
    """Fail if a token, the forget key or one of ``extra`` is in ``text``; one check counted."""
    for secret in (GATEWAY, DIRECT, FORGET_KEY, *extra):
        assert secret not in text, f"a secret appears in {where}"
    return 1
