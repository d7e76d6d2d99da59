"""Settings of a ``[[stores]]`` table with ``type = "acme-notes"``.

    [[stores]]
    name = "notes"
    type = "acme-notes"
    path = "/var/lib/acme/notes.json"
    token_env = "ACME_TOKEN"      # secrets: name an environment variable, never the value

``name``, ``type`` and ``mirror`` belong to the core; every other key of the table is validated
by this model. ``extra="forbid"`` turns a typo into a startup error naming the key.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class NotesSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="the notes file (created if missing)")
    token_env: str | None = Field(None, description="variable holding the API token, if any")
