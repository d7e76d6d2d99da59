"""Faithful loopback fakes of the vendor memory-store REST APIs, for store plugins' tests.

Each fake is a context manager that serves one vendor's API on ``127.0.0.1`` (a free port)
from a daemon thread, so the vendor's real SDK can be pointed at ``fake.url``::

    with FakeMem0(api_key="test-key") as fake:
        client = MemoryClient(api_key="test-key", host=fake.url)

All fakes share the switches ``fail``, ``fail_on``, ``fail_next``, ``lag_checks`` and
``dedupe``, and the backdoor views ``requests``, ``items`` and ``deleted``; see
:class:`FakeVendorServer`. The modules document each vendor's routes and quirks.
"""

from ._server import FakeVendorServer, Reply, Request
from .cognee import FakeCognee
from .letta import FakeLetta
from .mem0 import FakeMem0
from .zep import FakeZep

__all__ = [
    "FakeCognee",
    "FakeLetta",
    "FakeMem0",
    "FakeVendorServer",
    "FakeZep",
    "Reply",
    "Request",
]
