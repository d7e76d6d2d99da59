"""The shared store suite, run on this plugin: one subclass, four fixtures, its capabilities."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
from acme_custody_notes.store import NotesFile, NotesStore
from agent_custody_state_conformance import PluginHygiene, StoreConformance


class NotesBackdoor:
    """Looks into the vendor without the adapter: reads the JSON file itself."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def find(self, fact_id: str) -> dict[str, Any] | None:
        if not self.path.exists():
            return None
        for record_id, record in json.loads(self.path.read_text(encoding="utf-8")).items():
            if record["labels"].get("factId") == fact_id:
                return {"id": record_id, "text": record["body"], "metadata": record["labels"]}
        return None


class TestNotesStore(StoreConformance):
    # "verify": the store has verify_removed; "held": it has held_ids; "fail": a failing_store
    # fixture exists. Seven rules do not apply and are skipped (`pytest -rs` prints why):
    # ST-4.3-lag (no lagging index, so no "lag"), ST-4.3-unverified (the store can verify),
    # ST-4.3-blind (it does not declare verify_without_value), ST-4.2-refusal (no `refusal`),
    # ST-6-where (no `where`), ST-6-where-moves (no "relocate") and ST-6-residual (no
    # `residual`). docs/writing-plugins.md says what declaring each one takes.
    capabilities = frozenset({"verify", "held", "fail"})

    @pytest.fixture
    def path(self, tmp_path: Path) -> Path:
        return tmp_path / "notes.json"

    @pytest.fixture
    def store(self, path: Path) -> NotesStore:
        return NotesStore("notes", NotesFile(path))

    @pytest.fixture
    def backdoor(self, path: Path) -> NotesBackdoor:
        return NotesBackdoor(path)

    @pytest.fixture
    def failing_store(self, tmp_path: Path) -> NotesStore:
        # The vendor fails every call: its "file" is a directory.
        return NotesStore("notes", NotesFile(tmp_path))


class TestNotesHygiene(PluginHygiene):
    entry_point = "acme-notes"
    registers = frozenset({"store acme-notes"})
    heavy_modules = ("acme_custody_notes.store",)
    # A [[stores]] table's keys: rule PH-5 builds the store through the registered factory.
    store_settings: ClassVar[dict[str, dict[str, Any]]] = {"acme-notes": {"path": "notes.json"}}
