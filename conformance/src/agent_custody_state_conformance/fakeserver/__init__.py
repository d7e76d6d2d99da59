"""The base of faithful loopback fakes of vendor REST APIs, for store plugins' tests.

A fake subclasses :class:`FakeVendorServer`, declares its routes and the shape of its error
bodies, and is then a context manager that serves the vendor's API on ``127.0.0.1`` (a free port)
from a daemon thread, so the vendor's real SDK can be pointed at ``fake.url``::

    class FakeNotes(FakeVendorServer):
        vendor = "notes"
        auth_scheme = "Bearer"

        def routes(self):
            return [("GET", "/notes/{note_id}", "get", self._get)]

        def _get(self, request, params):
            record = self.items.get(params["note_id"])
            return json_reply(200, record) if record else self.error(404, "no such note")

    with FakeNotes(api_key="test-key") as fake:
        client = NotesClient(api_key="test-key", base_url=fake.url)

Every fake has the switches ``fail``, ``fail_on``, ``fail_next``, ``lag_checks`` and ``dedupe``,
and the backdoor views ``requests``, ``items`` and ``deleted``; see :class:`FakeVendorServer`.
The fakes of this repository's vendors live with their plugins (``agent_custody_state_mem0.
testing`` and so on) and show complete routes and quirks.

Only the standard library is used: a third party's tests pull in nothing for the server itself.
"""

from __future__ import annotations

from .matching import compare, is_uuid, iso_now, similarity
from .messages import (
    JSON,
    Abort,
    FormPart,
    Handler,
    Reply,
    Request,
    fastapi_validation_error,
    json_reply,
)
from .server import FakeVendorServer

__all__ = [
    "JSON",
    "Abort",
    "FakeVendorServer",
    "FormPart",
    "Handler",
    "Reply",
    "Request",
    "compare",
    "fastapi_validation_error",
    "is_uuid",
    "iso_now",
    "json_reply",
    "similarity",
]
