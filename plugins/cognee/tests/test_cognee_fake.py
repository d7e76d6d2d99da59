"""The Cognee fake, driven with ``httpx`` (Cognee has no official Python REST client)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent_custody_state_cognee.testing import FakeCognee

TEXT = "alice likes: green tea [fact f1]"


@pytest.fixture
def http(fake: FakeCognee) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fake.url, headers=fake.auth_headers()) as client:
        yield client


def _add(
    http: httpx.Client,
    texts: list[str],
    *,
    dataset: dict[str, str] | None = None,
    labels: list[str] | None = None,
    metadata: list[dict[str, Any]] | None = None,
    files: list[tuple[str, tuple[str, bytes, str]]] | None = None,
) -> httpx.Response:
    form: dict[str, Any] = {"raw_data": texts, **(dataset or {"datasetName": "custody"})}
    if labels is not None:
        form["labels"] = json.dumps(labels)
    if metadata is not None:
        form["external_metadata"] = json.dumps(metadata)
    return http.post("/api/v1/add", data=form, files=files)


def _listed(http: httpx.Client, dataset_id: str) -> list[dict[str, Any]]:
    reply = http.get(f"/api/v1/datasets/{dataset_id}/data", params={"limit": 100, "offset": 0})
    assert reply.status_code == 200
    return list(reply.json())


def test_add_list_delete_round_trip(fake: FakeCognee, http: httpx.Client) -> None:
    reply = _add(http, [TEXT], labels=["fact:f1"], metadata=[{"factId": "f1", "space": "s1"}])
    assert reply.status_code == 200
    run = reply.json()
    assert run["status"] == "PipelineRunCompleted" and run["dataset_name"] == "custody"
    data_id = run["data_ingestion_info"][0]["data_id"]
    dataset_id = run["dataset_id"]

    datasets = http.get("/api/v1/datasets").json()
    assert [(d["id"], d["name"]) for d in datasets] == [(dataset_id, "custody")]
    assert {"createdAt", "ownerId"} <= set(datasets[0])

    [item] = _listed(http, dataset_id)
    assert item["id"] == data_id and item["datasetId"] == dataset_id
    assert item["externalMetadata"] == {"factId": "f1", "space": "s1"}
    assert item["label"] == "fact:f1" and item["mimeType"] == "text/plain"
    assert "external_metadata" not in item  # camelCase only
    assert fake.raw_data[data_id] == TEXT.encode()

    deleted = http.delete(f"/api/v1/datasets/{dataset_id}/data/{data_id}")
    assert deleted.status_code == 200 and deleted.json() is None
    assert _listed(http, dataset_id) == []
    assert fake.deleted == [data_id]


def test_delete_of_unknown_data_id_still_answers_200(http: httpx.Client) -> None:
    dataset_id = _add(http, [TEXT]).json()["dataset_id"]
    unknown = "00000000-0000-4000-8000-000000000000"
    reply = http.delete(f"/api/v1/datasets/{dataset_id}/data/{unknown}")
    assert reply.status_code == 200 and reply.json() is None
    assert len(_listed(http, dataset_id)) == 1
    assert http.delete(f"/api/v1/datasets/{unknown}/data/{unknown}").status_code == 404
    assert http.delete(f"/api/v1/datasets/{dataset_id}/data/not-a-uuid").status_code == 400


def test_one_label_per_item_or_400(fake: FakeCognee, http: httpx.Client) -> None:
    reply = _add(http, [TEXT], labels=["agent-custody", "fact:f1"])
    assert reply.status_code == 400
    assert "[LabelCountMismatchError]" in reply.json()["detail"]
    reply = _add(http, [TEXT], metadata=[{"factId": "f1"}, {"factId": "f2"}])
    assert reply.status_code == 400
    assert "[ExternalMetadataCountMismatchError]" in reply.json()["detail"]
    reply = _add(http, [TEXT], metadata=[{"node_set": "x"}])
    assert reply.status_code == 400 and "[InvalidExternalMetadataError]" in reply.json()["detail"]
    assert fake.items == {}
    # All-empty label lists pair with nothing, so their length does not matter.
    assert _add(http, [TEXT], labels=["", ""]).status_code == 200


def test_multipart_with_a_blank_upload_part(http: httpx.Client) -> None:
    # Multipart clients often send an empty "data" part; the server drops blank uploads.
    reply = _add(http, [TEXT], labels=["fact:f1"], files=[("data", ("", b"", ""))])
    assert reply.status_code == 200
    assert len(reply.json()["data_ingestion_info"]) == 1


def test_uploads_pair_before_raw_data(http: httpx.Client) -> None:
    files = [("data", ("note.txt", b"uploaded text", "text/plain"))]
    reply = _add(http, ["raw text"], labels=["upload", "raw"], files=files)
    assert reply.status_code == 200
    info = reply.json()["data_ingestion_info"]
    items = {i["id"]: i for i in _listed(http, reply.json()["dataset_id"])}
    assert items[info[0]["data_id"]]["label"] == "upload"
    assert items[info[0]["data_id"]]["name"] == "note"
    assert items[info[1]["data_id"]]["label"] == "raw"


def test_identical_content_maps_onto_one_data_id(fake: FakeCognee, http: httpx.Client) -> None:
    first = _add(http, [TEXT], metadata=[{"factId": "f1"}]).json()
    second = _add(http, [TEXT], metadata=[{"factId": "f2"}]).json()
    data_id = first["data_ingestion_info"][0]["data_id"]
    assert second["data_ingestion_info"][0]["data_id"] == data_id
    [item] = _listed(http, first["dataset_id"])
    assert item["externalMetadata"] == {"factId": "f2"}  # the later add overwrote it
    fake.dedupe = False
    third = _add(http, [TEXT]).json()
    assert third["data_ingestion_info"][0]["data_id"] != data_id


def test_auth_api_key_or_bearer(fake: FakeCognee) -> None:
    url = fake.url
    assert httpx.get(f"{url}/health").json()["health"] == "healthy"  # no auth needed
    refused = httpx.get(f"{url}/api/v1/datasets")
    assert refused.status_code == 401 and refused.json() == {"detail": "Unauthorized"}
    assert httpx.get(f"{url}/api/v1/datasets", headers={"X-Api-Key": "test-key"}).is_success
    bearer = {"Authorization": "Bearer test-token"}
    assert httpx.get(f"{url}/api/v1/datasets", headers=bearer).is_success
    wrong = {"X-Api-Key": "nope"}
    assert httpx.get(f"{url}/api/v1/datasets", headers=wrong).status_code == 401


def test_only_configured_credentials_are_accepted() -> None:
    with FakeCognee(api_key=None, token="t") as fake:
        headers = {"X-Api-Key": "anything"}
        assert httpx.get(f"{fake.url}/api/v1/datasets", headers=headers).status_code == 401
        assert fake.auth_headers() == {"Authorization": "Bearer t"}
    with FakeCognee(api_key=None, token=None) as fake:
        assert httpx.get(f"{fake.url}/api/v1/datasets").status_code == 200


def test_fail_switch_and_fail_on(fake: FakeCognee, http: httpx.Client) -> None:
    fake.fail = True
    reply = _add(http, [TEXT])
    assert reply.status_code == 500 and reply.json()["error"]
    fake.fail = False
    run = _add(http, [TEXT]).json()
    fake.fail_on = {"delete"}
    data_id = run["data_ingestion_info"][0]["data_id"]
    assert http.delete(f"/api/v1/datasets/{run['dataset_id']}/data/{data_id}").status_code == 500
    assert len(_listed(http, run["dataset_id"])) == 1


def test_lag_checks_keep_deleted_item_listed(fake: FakeCognee, http: httpx.Client) -> None:
    run = _add(http, [TEXT]).json()
    data_id = run["data_ingestion_info"][0]["data_id"]
    fake.lag_checks = 1
    http.delete(f"/api/v1/datasets/{run['dataset_id']}/data/{data_id}")
    first, second = _listed(http, run["dataset_id"]), _listed(http, run["dataset_id"])
    assert ([i["id"] for i in first], second) == ([data_id], [])


def test_datasets_by_name_or_id(http: httpx.Client) -> None:
    created = http.post("/api/v1/datasets", json={"name": "by-id"}).json()
    again = http.post("/api/v1/datasets", json={"name": "by-id"}).json()
    assert created["id"] == again["id"]
    run = _add(http, [TEXT], dataset={"datasetId": created["id"]}).json()
    assert run["dataset_id"] == created["id"]
    unknown = {"datasetId": "00000000-0000-4000-8000-000000000000"}
    assert _add(http, [TEXT], dataset=unknown).status_code == 404
    assert http.post("/api/v1/add", data={"raw_data": [TEXT]}, files=[]).status_code == 400
    assert _add(http, [], dataset={"datasetName": "x"}).status_code == 400


def test_background_run_has_no_ingestion_info(http: httpx.Client) -> None:
    reply = _add(http, [TEXT], dataset={"datasetName": "bg", "run_in_background": "true"})
    assert reply.json()["status"] == "PipelineRunStarted"
    assert reply.json()["data_ingestion_info"] is None
