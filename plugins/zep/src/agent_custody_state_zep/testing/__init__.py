"""Test helpers for the Zep store: ``FakeZep``, a loopback fake of the Zep v4 REST API.

Point the real ``zep-cloud`` 4.x client at it::

    from agent_custody_state_zep.testing import FakeZep

    with FakeZep(api_key="test-key") as fake:
        client = Zep(api_key="test-key", base_url=fake.url + "/api/v4")

``fake.py`` holds the graphs, users and episodes; ``tasks.py`` the asynchronous tasks episode
writes answer with. Needs ``agent-custody-state-conformance`` (the fake server base): install
``agent-custody-state-zep[test]``.
"""

from __future__ import annotations

from .fake import FakeZep

__all__ = ["FakeZep"]
