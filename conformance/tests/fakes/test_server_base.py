"""The shared fake-server machinery: routing, recording, switches and helpers."""

from __future__ import annotations

import threading

import httpx
import pytest
from agent_custody_state_conformance.fakes import FakeLetta, FakeMem0, FakeZep
from agent_custody_state_conformance.fakes._server import Request, compare, similarity

AUTH = {"Authorization": "Token test-key"}


def test_context_manager_binds_loopback_and_stops() -> None:
    with FakeMem0() as fake:
        url = fake.url
        assert url.startswith("http://127.0.0.1:") and fake.port > 0
        assert httpx.get(f"{url}/v1/ping/", headers=AUTH).status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/v1/ping/", headers=AUTH, timeout=2)
    with pytest.raises(RuntimeError):
        _ = fake.url


def test_request_log_records_method_path_query_headers_body(mem0_fake: FakeMem0) -> None:
    httpx.post(
        f"{mem0_fake.url}/v3/memories/?page=2",
        headers={**AUTH, "X-Extra": "1"},
        json={"filters": {"user_id": "u"}},
    )
    [request] = mem0_fake.requests
    assert (request.method, request.path, request.op) == ("POST", "/v3/memories/", "list")
    assert request.query == {"page": ["2"]}
    assert request.headers["x-extra"] == "1"
    assert request.json() == {"filters": {"user_id": "u"}}


def test_unknown_route_and_wrong_method_use_vendor_error_shape(zep_fake: FakeZep) -> None:
    headers = {"Authorization": "Api-Key test-key"}
    missing = httpx.get(f"{zep_fake.url}/api/v4/nowhere", headers=headers)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    wrong = httpx.put(f"{zep_fake.url}/api/v4/graphs", headers=headers)
    assert wrong.status_code == 405
    unprefixed = httpx.post(f"{zep_fake.url}/graphs", headers=headers, json={})
    assert unprefixed.status_code == 404  # the SDK base_url must include /api/v4
    assert zep_fake.requests[-1].op is None


def test_invalid_json_body_is_a_vendor_400(mem0_fake: FakeMem0) -> None:
    reply = httpx.post(
        f"{mem0_fake.url}/v3/memories/search/",
        headers={**AUTH, "Content-Type": "application/json"},
        content=b"{not json",
    )
    assert reply.status_code == 400 and "error" in reply.json()


def test_fail_next_fails_then_recovers(mem0_fake: FakeMem0) -> None:
    mem0_fake.fail_next = 2
    codes = [httpx.get(f"{mem0_fake.url}/v1/ping/", headers=AUTH).status_code for _ in range(3)]
    assert codes == [500, 500, 200]


def test_auth_is_checked_before_the_fail_switch(mem0_fake: FakeMem0) -> None:
    mem0_fake.fail = True
    assert httpx.get(f"{mem0_fake.url}/v1/ping/").status_code == 401


def test_no_api_key_means_open(letta_fake: FakeLetta) -> None:
    with FakeLetta(api_key=None) as fake:
        agent = fake.add_agent()
        reply = httpx.get(f"{fake.url}/v1/agents/{agent}/archival-memory")
        assert reply.status_code == 200 and reply.json() == []


def test_concurrent_requests_are_all_served(mem0_fake: FakeMem0) -> None:
    results: list[int] = []
    with httpx.Client(base_url=mem0_fake.url, headers=AUTH) as client:

        def add(index: int) -> None:
            body = {"messages": [{"role": "user", "content": f"fact {index}"}], "user_id": "u",
                    "infer": False}  # fmt: skip
            results.append(client.post("/v3/memories/add/", json=body).status_code)

        threads = [threading.Thread(target=add, args=(i,)) for i in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert results == [200] * 16
    assert len(mem0_fake.items) == 16 and len(mem0_fake.requests_for("add")) == 16


def test_multipart_form_parsing() -> None:
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


def test_similarity_and_compare() -> None:
    assert similarity("Alice likes tea", "alice likes tea") == 1.0
    assert similarity("quantum", "alice likes tea") == 0.0
    assert 0 < similarity("alice tea", "alice likes tea") < 1
    assert compare("in", "a", ["a", "b"]) and not compare("in", "c", ["a", "b"])
    assert compare("contains", ["x", "y"], "y") and compare("contains", "abc", "b")
    assert compare("gte", 3, 3) and not compare("lt", "a", 1)  # mismatched types never match
    assert compare("is_null", None, None) and compare("is_not_null", 0, None)
    with pytest.raises(KeyError):
        compare("regex", "a", "a")
