"""The adapter: the ``Store`` protocol over the vendor (here a toy JSON notes file).

Replace ``NotesFile`` with your vendor's SDK client. What to keep:

- ``put`` writes ``fact_text(fact)`` and ``custody_metadata(fact)`` and returns the vendor's id;
- ``remove`` deletes by that id and treats "already gone" as success;
- ``verify_removed`` asks the vendor (a read by id *and* a search by the fact id) and raises
  when it cannot ask, never answering True blindly;
- ``held_ids`` (optional, recommended) names every copy of a fact by the fact id in its
  labels, and raises when it cannot ask: ``[]`` promises there is no copy;
- every vendor failure becomes ``StoreError(self.name, ...)``: ``storekit.call_sdk`` does that,
  and runs the blocking SDK call in a worker thread so the server's event loop never waits.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path
from typing import Any

from agent_custody_state.plugin import Fact, call_sdk, custody_metadata, fact_text, secret_from_env

from .settings import NotesSettings


class NotesFile:
    """The toy vendor: records in one JSON file, ``{record_id: {"body", "labels"}}``."""

    def __init__(self, path: str | os.PathLike[str], token: str | None = None) -> None:
        self.path = Path(path)
        self.token = token
        self._lock = threading.Lock()

    def _load(self) -> dict[str, Any]:
        if not self.path.exists():
            return {}
        data: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))
        return data

    def _save(self, records: dict[str, Any]) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
        tmp.replace(self.path)

    def create(self, body: str, labels: dict[str, Any]) -> str:
        with self._lock:
            records = self._load()
            record_id = f"note_{uuid.uuid4().hex}"
            records[record_id] = {"body": body, "labels": labels}
            self._save(records)
            return record_id

    def delete(self, record_id: str) -> bool:
        with self._lock:
            records = self._load()
            found = records.pop(record_id, None) is not None
            self._save(records)
            return found

    def get(self, record_id: str) -> dict[str, Any] | None:
        with self._lock:
            record: dict[str, Any] | None = self._load().get(record_id)
            return record

    def find(self, **labels: Any) -> list[str]:
        with self._lock:
            return [
                rid
                for rid, r in self._load().items()
                if all(r["labels"].get(k) == v for k, v in labels.items())
            ]


class NotesStore:
    """A ``Store`` over ``NotesFile``."""

    def __init__(self, name: str, client: NotesFile) -> None:
        self.name = name
        self.client = client

    async def put(self, fact: Fact) -> str:
        return await call_sdk(
            self.name, "put", self.client.create, fact_text(fact), custody_metadata(fact)
        )

    async def remove(self, external_id: str, fact: Fact) -> None:
        # delete() answers False for an unknown id: already gone is not an error.
        await call_sdk(self.name, "remove", self.client.delete, external_id)

    async def verify_removed(self, external_id: str, fact: Fact) -> bool:
        def gone() -> bool:
            if self.client.get(external_id) is not None:
                return False
            # Any record of the fact counts, whatever its id: an add retried after a timeout
            # that had landed leaves a second copy (conformance rule ST-4.3-copies).
            return not self.client.find(factId=fact.fact_id)

        return await call_sdk(self.name, "verify", gone)

    async def held_ids(self, fact: Fact) -> list[str]:
        # After a put that raised (the vendor may have stored the fact and lost the answer) the
        # core removes what this names. Look up by the fact id only, never by the text.
        return await call_sdk(self.name, "held_ids", self.client.find, factId=fact.fact_id)


def build(settings: NotesSettings, *, name: str) -> NotesStore:
    """The factory the core calls: ``factory(settings, name=...)``."""
    token = secret_from_env(name, settings.token_env, what="API token")
    return NotesStore(name, NotesFile(settings.path, token))
