"""A loopback fake of the Cognee 1.6 REST server's ingestion and dataset routes.

Cognee has no official Python REST client, so adapters speak HTTP themselves; this fake
holds them to the server's real conventions:

* ``POST /api/v1/add`` is ``multipart/form-data``: items come from ``data`` file parts, then
  ``raw_data`` string parts; ``datasetName`` (created on demand) or ``datasetId``;
  ``labels`` and ``external_metadata`` are JSON arrays paired positionally with the items,
  and a partial list is a 400 (``LabelCountMismatchError`` /
  ``ExternalMetadataCountMismatchError``). The reply is a snake_case ``PipelineRunInfo``
  whose ``data_ingestion_info[i].data_id`` is the id of item *i*.
* ``GET``/``POST /api/v1/datasets`` and ``GET /api/v1/datasets/{id}/data`` answer
  **camelCase** bodies (``createdAt``, ``externalMetadata``...).
* ``DELETE /api/v1/datasets/{id}/data/{data_id}`` answers 200 with body ``null``, for an
  unknown data id too, so only a re-list proves removal.
* ``GET /health`` needs no credentials.

Identical content re-added to a dataset maps onto the existing ``data_id`` (the item's
label and metadata are updated in place); switch off with ``fake.dedupe = False``.
A dataset id put in ``fake.unreadable`` answers 404 to every route while its items stay, as
Cognee answers for a dataset the user has no permission on.
``fake.store_later = N`` makes the next N adds answer 504 before their items are stored, as a
gateway does that gave up while Cognee was still ingesting: the server finishes them anyway, when
``fake.finish_adds()`` is called (a client timeout looks the same).
Credentials: ``X-Api-Key: <api_key>`` and/or ``Authorization: Bearer <token>``, whichever
are configured; with neither configured the fake is open, like a server run with
``ENABLE_BACKEND_ACCESS_CONTROL=false``.

Import it as ``from agent_custody_state_cognee.testing import FakeCognee``; it needs the fake server
base from ``agent-custody-state-conformance``, which ``agent-custody-state-cognee[test]`` installs.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Any

from agent_custody_state_conformance.fakeserver import (
    Abort,
    FakeVendorServer,
    FormPart,
    Handler,
    Reply,
    Request,
    fastapi_validation_error,
    is_uuid,
    iso_now,
    json_reply,
)

__all__ = ["FakeCognee"]

VERSION = "1.6.5-fake"
_ID_NAMESPACE = uuid.UUID("6f0d3a34-5d2f-4a53-9a51-7c0c5d2f0c11")  # fixed: stable data ids


class FakeCognee(FakeVendorServer):
    """Fake Cognee server. ``with FakeCognee(api_key="test-key") as fake: fake.url``.

    Extra views: ``datasets`` (dataset id -> camelCase body), ``raw_data`` (data id -> the
    ingested bytes). ``items`` holds data items (camelCase, as listed). Helper:
    ``auth_headers()`` gives headers that pass the configured auth.
    """

    vendor = "cognee"

    def __init__(
        self,
        *,
        api_key: str | None = "test-key",
        token: str | None = "test-token",
        owner_id: str | None = None,
    ) -> None:
        super().__init__(api_key=api_key)
        self.token = token
        self.owner_id = owner_id or str(uuid.uuid4())
        self.datasets: dict[str, dict[str, Any]] = {}
        self.raw_data: dict[str, bytes] = {}
        #: dataset ids these credentials may not read: listing and deleting answer 404, as
        #: Cognee does for a dataset without the user's permission, while the items stay
        self.unreadable: set[str] = set()
        self.store_later = 0
        self._unfinished: list[tuple[str, dict[str, Any], str | None, dict[str, Any] | None]] = []

    def finish_adds(self) -> None:
        """Ingest the items of the adds ``store_later`` answered 504 for (the server caught up)."""
        with self.lock:
            unfinished, self._unfinished = self._unfinished, []
            for dataset_id, item, label, extra in unfinished:
                self._ingest(dataset_id, item, label, extra)

    def auth_headers(self) -> dict[str, str]:
        if self.api_key is not None:
            return {"X-Api-Key": self.api_key}
        if self.token is not None:
            return {"Authorization": f"Bearer {self.token}"}
        return {}

    def routes(self) -> Iterable[tuple[str, str, str, Handler]]:
        return [
            ("GET", "/health", "health", self._health),
            ("POST", "/api/v1/add", "add", self._add),
            ("GET", "/api/v1/datasets", "datasets", self._list_datasets),
            ("POST", "/api/v1/datasets", "create_dataset", self._create_dataset),
            ("GET", "/api/v1/datasets/{dataset_id}/data", "list", self._list),
            ("DELETE", "/api/v1/datasets/{dataset_id}/data/{data_id}", "delete", self._delete),
        ]

    def error(self, status: int, message: str, code: str | None = None) -> Reply:
        if code is not None:  # a CogneeApiError, as the server's global handler renders it
            return json_reply(status, {"detail": f"{message} [{code}]"})
        if status in (400, 500):  # the routes' own ErrorResponse
            return json_reply(status, {"error": message, "detail": None})
        return json_reply(status, {"detail": message})

    def authorized(self, request: Request) -> bool:
        if self.api_key is None and self.token is None:
            return True
        by_key = self.api_key is not None and request.headers.get("x-api-key") == self.api_key
        bearer = f"Bearer {self.token}"
        by_token = self.token is not None and request.headers.get("authorization") == bearer
        return by_key or by_token

    def auth_exempt(self, op: str) -> bool:
        return op == "health"

    # -- datasets -----------------------------------------------------------------------

    def _dataset_named(self, name: str) -> dict[str, Any]:
        for dataset in self.datasets.values():
            if dataset["name"] == name:
                return dataset
        dataset_id, now = str(uuid.uuid4()), iso_now()
        self.datasets[dataset_id] = {"id": dataset_id, "name": name, "createdAt": now,
                                     "updatedAt": None, "ownerId": self.owner_id}  # fmt: skip
        return self.datasets[dataset_id]

    def _dataset(self, dataset_id: str) -> dict[str, Any]:
        _require_uuid(dataset_id, "dataset_id")
        dataset = self.datasets.get(dataset_id)
        if dataset is None or dataset_id in self.unreadable:
            raise Abort(
                self.error(404, f"Dataset ({dataset_id}) not found.", "DatasetNotFoundError")
            )
        return dataset

    def _health(self, request: Request, params: dict[str, str]) -> Reply:
        return json_reply(200, {"status": "ready", "health": "healthy", "version": VERSION})

    def _list_datasets(self, request: Request, params: dict[str, str]) -> Reply:
        return json_reply(200, list(self.datasets.values()))

    def _create_dataset(self, request: Request, params: dict[str, str]) -> Reply:
        name = self._body(request).get("name")
        if not isinstance(name, str) or not name:
            return _validation_error(["body", "name"], "Field required")
        return json_reply(200, self._dataset_named(name))

    def _list(self, request: Request, params: dict[str, str]) -> Reply:
        _require_uuid(params["dataset_id"], "dataset_id")
        if params["dataset_id"] not in self.datasets or params["dataset_id"] in self.unreadable:
            return json_reply(404, {"message": f"Dataset ({params['dataset_id']}) not found."})
        rows = [r for r in self._indexed() if r["datasetId"] == params["dataset_id"]]
        offset = int(request.arg("offset") or 0)
        limit = int(request.arg("limit") or len(rows) or 1)
        return json_reply(200, rows[offset : offset + limit])

    def _delete(self, request: Request, params: dict[str, str]) -> Reply:
        self._dataset(params["dataset_id"])
        _require_uuid(params["data_id"], "data_id")
        record = self.items.get(params["data_id"])
        # The real server answers 200 for an unknown id too (it falls through to a
        # custom-graph deletion), so a 200 proves nothing.
        if record is not None and record["datasetId"] == params["dataset_id"]:
            self._remove(params["data_id"])
            self.raw_data.pop(params["data_id"], None)
        return json_reply(200, None)

    # -- ingestion ----------------------------------------------------------------------

    def _add(self, request: Request, params: dict[str, str]) -> Reply:
        parts = request.form()
        fields = {p.name: p.text for p in parts if p.name not in ("data", "raw_data")}
        dataset_id, dataset_name = fields.get("datasetId") or None, fields.get("datasetName")
        if not dataset_id and not dataset_name:
            return self.error(400, "Either datasetId or datasetName must be provided.")
        uploads = [_upload(p) for p in parts if p.name == "data" and p.value]
        texts = [p.text.strip() for p in parts if p.name == "raw_data" and p.text.strip()]
        items = uploads + [_text_item(t) for t in texts]
        labels = self._paired(_labels(fields.get("labels")), len(items), "label")
        metadata = self._paired(
            self._external_metadata(fields.get("external_metadata")), len(items), "metadata"
        )
        if not items:
            return self.error(
                400, "Provide at least one file in 'data' or one entry in 'raw_data'."
            )
        dataset = (
            self._dataset(dataset_id) if dataset_id else self._dataset_named(dataset_name or "")
        )
        if self.store_later > 0:
            self.store_later -= 1
            entries = zip(items, labels, metadata, strict=True)
            self._unfinished += [(dataset["id"], *entry) for entry in entries]
            return self.error(504, "Gateway Timeout")
        run_id = str(uuid.uuid4())
        info = []
        for item, label, extra in zip(items, labels, metadata, strict=True):
            data_id, fresh = self._ingest(dataset["id"], item, label, extra)
            status = "PipelineRunCompleted" if fresh else "PipelineRunAlreadyCompleted"
            info.append({"run_info": _run_info(status, run_id, dataset), "data_id": data_id})
        if fields.get("run_in_background", "").lower() == "true":
            return json_reply(200, _run_info("PipelineRunStarted", run_id, dataset))
        return json_reply(
            200, {**_run_info("PipelineRunCompleted", run_id, dataset), "data_ingestion_info": info}
        )

    def _ingest(
        self, dataset_id: str, item: dict[str, Any], label: str | None, extra: dict[str, Any] | None
    ) -> tuple[str, bool]:
        digest = hashlib.md5(item["content"]).hexdigest()
        if self.dedupe:
            data_id = str(uuid.uuid5(_ID_NAMESPACE, f"{dataset_id}:{digest}"))
        else:
            data_id = str(uuid.uuid4())
        existing = self.items.get(data_id)
        now = iso_now()
        if existing is not None:
            existing["updatedAt"] = now
            existing["label"] = label or existing["label"]
            existing["externalMetadata"] = {**existing["externalMetadata"], **(extra or {})}
            return data_id, False
        self.raw_data[data_id] = item["content"]
        self._store(
            data_id,
            {
                "id": data_id, "name": item["name"], "createdAt": now, "updatedAt": None,
                "extension": item["extension"], "mimeType": item["mime"],
                "rawDataLocation": f"file:///fake-cognee/data/{item['name']}.{item['extension']}",
                "datasetId": dataset_id, "label": label, "externalMetadata": dict(extra or {}),
                "dataSize": len(item["content"]),
            },
        )  # fmt: skip
        return data_id, True

    def _paired(self, entries: list[Any] | None, count: int, what: str) -> list[Any]:
        """Positional pairing: any non-empty entry makes the list's length binding."""
        normalized = [entry or None for entry in entries or []]
        if not any(normalized):
            return [None] * count
        if len(normalized) != count:
            if what == "label":
                message = f"Provide one label per uploaded file: got {len(normalized)} labels"
                name = "LabelCountMismatchError"
            else:
                message = (
                    "Provide one external_metadata entry per uploaded file: got "
                    f"{len(normalized)} entries"
                )
                name = "ExternalMetadataCountMismatchError"
            raise Abort(self.error(400, f"{message} for {count} files.", name))
        return normalized

    def _external_metadata(self, raw: str | None) -> list[Any] | None:
        if raw is None or not raw.strip():
            return None
        name = "InvalidExternalMetadataError"
        try:
            parsed = json.loads(raw)
        except ValueError as error:
            raise Abort(
                self.error(400, f"external_metadata is not valid JSON: {error}", name)
            ) from None
        if not isinstance(parsed, list) or not all(
            e is None or isinstance(e, dict) for e in parsed
        ):
            raise Abort(self.error(400, "external_metadata must be a JSON array of objects", name))
        if any(entry and "node_set" in entry for entry in parsed):
            raise Abort(
                self.error(400, "external_metadata entries cannot contain 'node_set'", name)
            )
        return parsed


def _labels(raw: str | None) -> list[Any] | None:
    """The ``labels`` field: a JSON array of strings, or the comma form Swagger UI sends."""
    if raw is None or not raw.strip():
        return None
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if isinstance(parsed, list):
        if not all(e is None or isinstance(e, str) for e in parsed):
            raise Abort(
                json_reply(
                    400, {"detail": "labels must be a JSON array of strings [InvalidLabelsError]"}
                )
            )
        return parsed
    return [segment.strip() for segment in raw.split(",")]


def _upload(part: FormPart) -> dict[str, Any]:
    path = PurePosixPath(part.filename or "upload.txt")
    return {"content": part.value, "name": path.stem, "extension": path.suffix.lstrip(".") or "txt",
            "mime": (part.content_type or "text/plain").split(";")[0]}  # fmt: skip


def _text_item(text: str) -> dict[str, Any]:
    content = text.encode()
    name = f"text_{hashlib.md5(content).hexdigest()}"
    return {"content": content, "name": name, "extension": "txt", "mime": "text/plain"}


def _run_info(status: str, run_id: str, dataset: dict[str, Any]) -> dict[str, Any]:
    return {"status": status, "pipeline_run_id": run_id, "dataset_id": dataset["id"],
            "dataset_name": dataset["name"], "payload": None,
            "data_ingestion_info": None}  # fmt: skip


def _validation_error(location: list[str], message: str) -> Reply:
    # Cognee's RequestValidationError handler answers 400, not FastAPI's default 422.
    return fastapi_validation_error(400, location, message, body=None)


def _require_uuid(value: str, name: str) -> None:
    if not is_uuid(value):
        raise Abort(_validation_error(["path", name], "Input should be a valid UUID"))
