"""The generic fake-server base: routing, recording, switches and helpers, on a toy vendor.

``FakeNotes`` below is the smallest vendor a store plugin could write (a path prefix, token auth,
its own error envelope, a health route without auth); every behaviour of
:class:`FakeVendorServer` is checked through it over real HTTP. The vendors' own fakes are tested
with their plugins (``plugins/<name>/tests/test_<name>_fake.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

import httpx
import pytest

from agent_custody_state_conformance.fakeserver import (
    Abort,
    FakeVendorServer,
    Handler,
    Reply,
    Request,
    compare,
    is_uuid,
    json_reply,
    similarity,
)

AUTH = {"Authorization": "Token test-key"}


class FakeNotes(FakeVendorServer):
    """A toy vendor: notes under ``/api/v1``, ``Token`` auth, ``{"error": {code, message}}``."""

    vendor = "notes"
    prefix = "/api/v1"
    auth_scheme = "Token"

    def routes(self) -> Iterable[tuple[str, str, str, Handler]]:
        return [
            ("GET", "/health", "health", lambda request, params: json_reply(200, {"ok": True})),
            ("GET", "/ping", "ping", lambda request, params: json_reply(200, {"pong": True})),
            ("POST", "/notes", "add", self._add),
            ("POST", "/notes/search", "search", self._search),
            ("GET", "/notes/{note_id}", "get", self._get),
            ("DELETE", "/notes/{note_id}", "delete", self._delete),
            ("POST", "/upload", "upload", self._upload),
            ("GET", "/crash", "crash", self._crash),
        ]

    def error(self, status: int, message: str, code: str | None = None) -> Reply:
        return json_reply(status, {"error": {"code": code or str(status), "message": message}})

    def auth_exempt(self, op: str) -> bool:
        return op == "health"

    def _add(self, request: Request, params: dict[str, str]) -> Reply:
        text = self._body(request).get("text")
        if not isinstance(text, str):
            raise Abort(self.error(400, "text is required", code="invalid"))
        note_id = self._new_uuid()
        self._store(note_id, {"id": note_id, "text": text})
        return json_reply(201, {"id": note_id})

    def _search(self, request: Request, params: dict[str, str]) -> Reply:
        query = str(self._body(request).get("query") or "")
        hits = [r for r in self._indexed() if similarity(query, r["text"]) > 0]
        return json_reply(200, {"results": hits})

    def _get(self, request: Request, params: dict[str, str]) -> Reply:
        record = self.items.get(params["note_id"])
        return json_reply(200, record) if record else self.error(404, "no such note")

    def _delete(self, request: Request, params: dict[str, str]) -> Reply:
        if self._remove(params["note_id"]) is None:
            return self.error(404, "no such note")
        return json_reply(200, {"deleted": params["note_id"]})

    def _upload(self, request: Request, params: dict[str, str]) -> Reply:
        return json_reply(200, [[p.name, p.text, p.filename] for p in request.form()])

    def _crash(self, request: Request, params: dict[str, str]) -> Reply:
        raise RuntimeError("a bug in the fake")


@pytest.fixture
def fake() -> Iterator[FakeNotes]:
    with FakeNotes(api_key="test-key") as server:
        yield server


@pytest.fixture
def http(fake: FakeNotes) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fake.url + "/api/v1", headers=AUTH) as client:
        yield client


def test_context_manager_binds_loopback_and_stops() -> None:
    with FakeNotes() as fake:
        url = fake.url
        assert url.startswith("http://127.0.0.1:") and fake.port > 0
        assert httpx.get(f"{url}/api/v1/ping", headers=AUTH).status_code == 200
        assert repr(fake) == f"<FakeNotes {url} items=0>"
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/api/v1/ping", headers=AUTH, timeout=2)
    with pytest.raises(RuntimeError):
        _ = fake.url
    assert repr(fake) == "<FakeNotes stopped items=0>"
    fake.stop()  # stopping twice is harmless


def test_request_log_records_method_path_query_headers_body(
    fake: FakeNotes, http: httpx.Client
) -> None:
    http.post("/notes/search?page=2", headers={"X-Extra": "1"}, json={"query": "tea"})
    [request] = fake.requests
    assert (request.method, request.path, request.op) == ("POST", "/api/v1/notes/search", "search")
    assert request.query == {"page": ["2"]}
    assert request.headers["x-extra"] == "1"
    assert request.arg("page") == "2" and request.arg("missing", "d") == "d"
    assert request.json() == {"query": "tea"}
    assert fake.requests_for("search") == [request] and fake.requests_for("add") == []


def test_unknown_route_and_wrong_method_use_vendor_error_shape(
    fake: FakeNotes, http: httpx.Client
) -> None:
    missing = http.get("/nowhere")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "404"
    wrong = http.put("/notes")
    assert wrong.status_code == 405 and wrong.json()["error"]["message"] == "Method Not Allowed"
    unprefixed = httpx.post(f"{fake.url}/notes", headers=AUTH, json={"text": "x"})
    assert unprefixed.status_code == 404  # routes live under the prefix only
    assert fake.requests[-1].op is None and fake.items == {}


def test_invalid_json_body_is_a_vendor_400(http: httpx.Client) -> None:
    reply = http.post("/notes", headers={"Content-Type": "application/json"}, content=b"{not json")
    assert reply.status_code == 400 and reply.json()["error"]["message"].startswith("request body")
    not_an_object = http.post("/notes", json=["a list"])
    assert not_an_object.status_code == 400
    aborted = http.post("/notes", json={"no": "text"})
    assert aborted.status_code == 400 and aborted.json()["error"]["code"] == "invalid"


def test_fail_next_fails_then_recovers(fake: FakeNotes, http: httpx.Client) -> None:
    fake.fail_next = 2
    codes = [http.get("/ping").status_code for _ in range(3)]
    assert codes == [500, 500, 200]
    assert fake.fail_next == 0


def test_fail_and_fail_on(fake: FakeNotes, http: httpx.Client) -> None:
    fake.fail_on = {"add"}
    assert http.post("/notes", json={"text": "x"}).status_code == 500
    assert http.get("/ping").status_code == 200 and fake.items == {}
    fake.fail_on = set()
    fake.fail = True
    assert http.get("/ping").status_code == 500
    assert http.post("/notes", json={"text": "x"}).json()["error"]["code"] == "500"


def test_auth_is_checked_before_the_fail_switch(fake: FakeNotes) -> None:
    fake.fail = True
    assert httpx.get(f"{fake.url}/api/v1/ping").status_code == 401
    wrong = httpx.get(f"{fake.url}/api/v1/ping", headers={"Authorization": "Token nope"})
    assert wrong.status_code == 401 and wrong.json()["error"]["message"] == "Unauthorized"


def test_auth_exempt_route_needs_no_credentials(fake: FakeNotes) -> None:
    assert httpx.get(f"{fake.url}/api/v1/health").status_code == 200


def test_no_api_key_means_open() -> None:
    with FakeNotes(api_key=None) as fake:
        reply = httpx.post(f"{fake.url}/api/v1/notes", json={"text": "open"})
        assert reply.status_code == 201 and len(fake.items) == 1


def test_lag_checks_keep_a_removed_item_in_search_only(fake: FakeNotes, http: httpx.Client) -> None:
    note_id = http.post("/notes", json={"text": "alice likes tea"}).json()["id"]
    fake.lag_checks = 2
    assert http.delete(f"/notes/{note_id}").status_code == 200
    assert fake.deleted == [note_id] and note_id not in fake.items
    assert http.get(f"/notes/{note_id}").status_code == 404  # reads by id are exact at once
    searches = [
        http.post("/notes/search", json={"query": "tea"}).json()["results"] for _ in range(3)
    ]
    assert [[r["id"] for r in hits] for hits in searches] == [[note_id], [note_id], []]
    assert http.delete(f"/notes/{note_id}").status_code == 404


def test_search_lists_oldest_first(http: httpx.Client) -> None:
    ids = [http.post("/notes", json={"text": f"tea note {i}"}).json()["id"] for i in range(3)]
    hits = http.post("/notes/search", json={"query": "tea"}).json()["results"]
    assert [hit["id"] for hit in hits] == ids


def test_concurrent_requests_are_all_served(fake: FakeNotes, http: httpx.Client) -> None:
    results: list[int] = []

    def add(index: int) -> None:
        results.append(http.post("/notes", json={"text": f"fact {index}"}).status_code)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [201] * 16
    assert len(fake.items) == 16 and len(fake.requests_for("add")) == 16


def test_chunked_request_body_is_read(fake: FakeNotes, http: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"text": '
        yield b'"sent in chunks"}'

    reply = http.post("/notes", content=chunks(), headers={"Content-Type": "application/json"})
    assert reply.status_code == 201
    assert fake.requests[-1].headers.get("transfer-encoding") == "chunked"
    assert [r["text"] for r in fake.items.values()] == ["sent in chunks"]


def test_a_crashing_route_answers_500_in_the_vendor_shape(http: httpx.Client) -> None:
    reply = http.get("/crash")
    assert reply.status_code == 500
    assert "a bug in the fake" in reply.json()["error"]["message"]
    assert http.get("/ping").status_code == 200  # the server keeps serving


def test_multipart_form_parsing(http: httpx.Client) -> None:
    body = (
        b'--b\r\nContent-Disposition: form-data; name="raw_data"\r\n\r\nhello\r\n'
        b'--b\r\nContent-Disposition: form-data; name="data"; filename="a.txt"\r\n'
        b"Content-Type: text/plain\r\n\r\nfile body\r\n--b--\r\n"
    )
    request = Request("POST", "/", {}, {"content-type": "multipart/form-data; boundary=b"}, body)
    parts = request.form()
    assert [(p.name, p.text, p.filename) for p in parts] == [
        ("raw_data", "hello", None),
        ("data", "file body", "a.txt"),
    ]
    assert parts[1].content_type == "text/plain"
    sent = http.post("/upload", data={"label": "x"}, files={"data": ("b.txt", b"up", "text/plain")})
    assert sent.json() == [["label", "x", None], ["data", "up", "b.txt"]]
    form = http.post("/upload", data={"a": "1", "b": ""})
    assert form.json() == [["a", "1", None], ["b", "", None]]
    assert Request("POST", "/", {}, {"content-type": "text/plain"}, b"a=1").form() == []


def test_similarity_compare_and_ids() -> None:
    assert similarity("Alice likes tea", "alice likes tea") == 1.0
    assert similarity("quantum", "alice likes tea") == 0.0
    assert 0 < similarity("alice tea", "alice likes tea") < 1
    assert compare("in", "a", ["a", "b"]) and not compare("in", "c", ["a", "b"])
    assert compare("contains", ["x", "y"], "y") and compare("contains", "abc", "b")
    assert compare("gte", 3, 3) and not compare("lt", "a", 1)  # mismatched types never match
    assert compare("is_null", None, None) and compare("is_not_null", 0, None)
    with pytest.raises(KeyError):
        compare("regex", "a", "a")
    assert is_uuid("6f1c1a5e-8f0a-4c3e-9a57-0d5b8f1e2a3b") and not is_uuid("agent-1")


def test_reply_encoding() -> None:
    assert Reply(200, {"a": 1}).encode() == b'{"a": 1}'
    assert Reply(200, raw=b"raw bytes").encode() == b"raw bytes"
    body: Any = json_reply(201, None, {"X-Id": "1"})
    assert (body.status, body.headers, body.encode()) == (201, {"X-Id": "1"}, b"null")
