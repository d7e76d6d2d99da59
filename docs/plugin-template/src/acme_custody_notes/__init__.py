"""acme-custody-notes: registers the ``acme-notes`` store type with agent-custody-state.

Keep this module cheap: it is imported whenever agent-custody-state loads plugins. Name the
factory and the settings model as ``"module:attribute"`` strings; they (and your vendor SDK)
are imported only when a ``[[stores]]`` table uses ``type = "acme-notes"``.
"""

from __future__ import annotations

from agent_custody_state.plugin import RegisterStore, hookimpl


@hookimpl
def register_stores(register: RegisterStore) -> None:
    register(
        "acme-notes",
        "acme_custody_notes.store:build",
        settings="acme_custody_notes.settings:NotesSettings",
        description="example: facts as records in a JSON notes file",
    )
