"""Zep's asynchronous tasks, as the fake runs them: writes answer 202 with a task to poll.

An episode add or delete is accepted at once and done by a worker later; the client learns the
outcome from ``GET /tasks/{uuid}``. Here a task stays ``pending`` for a set number of polls and
then completes, applying its effect only when it succeeded. :class:`ZepTasks` holds that
machinery (the task table, the deferred work, the task route); :class:`~.fake.FakeZep` builds its
episode routes on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_custody_state_conformance.fakeserver import (
    FakeVendorServer,
    Reply,
    Request,
    iso_now,
    json_reply,
)

__all__ = ["ZepTasks"]


@dataclass
class _Work:
    """What a task does when it completes, and how many polls it stays pending first."""

    polls_left: int
    apply: Callable[[], None]


class ZepTasks(FakeVendorServer):
    """The task half of the Zep fake.

    Switches: ``task_polls_pending`` (polls a delete task answers ``pending`` first),
    ``ingest_polls_pending`` (the same for an ingestion task), ``task_outcome``
    (``"succeeded"``, ``"failed"`` or ``"partial"``; only a succeeded task has an effect).
    View: ``tasks`` (uuid -> wire body). ``complete_tasks()`` finishes every pending task.
    """

    def __init__(self, *, api_key: str | None = "test-key") -> None:
        super().__init__(api_key=api_key)
        self.task_polls_pending = 0
        self.ingest_polls_pending = 0
        self.task_outcome = "succeeded"
        self.tasks: dict[str, dict[str, Any]] = {}
        # Deferred work keeps what it will store in its closure until the task completes.
        self._work: dict[str, _Work] = {}

    def complete_tasks(self) -> None:
        """Finish every pending task now, as if the workers caught up."""
        with self.lock:
            for task_uuid in list(self._work):
                self._complete(task_uuid)

    def _new_task(
        self, kind: str, episode_uuid: str, polls: int, apply: Callable[[], None]
    ) -> dict[str, Any]:
        task_uuid = self._new_uuid()
        now = iso_now()
        self.tasks[task_uuid] = {
            "uuid": task_uuid, "type": kind, "status": "pending", "created_at": now,
            "updated_at": now, "started_at": None, "completed_at": None, "error": None,
            "result": {"episode_uuid": episode_uuid},
        }  # fmt: skip
        snapshot = dict(self.tasks[task_uuid])
        self._work[task_uuid] = _Work(polls, apply)
        if polls <= 0:
            self._complete(task_uuid)  # a fast worker: done before anyone asks
        return snapshot

    def _complete(self, task_uuid: str) -> None:
        work = self._work.pop(task_uuid)
        task = self.tasks[task_uuid]
        now = iso_now()
        task.update(status=self.task_outcome, updated_at=now, started_at=now, completed_at=now)
        if self.task_outcome == "succeeded":
            work.apply()
        else:
            task["error"] = {"code": "task_failed", "message": f"fake task {self.task_outcome}"}

    def _task(self, request: Request, params: dict[str, str]) -> Reply:
        task = self.tasks.get(params["task"])
        if task is None:
            return self.error(404, "task not found")
        work = self._work.get(params["task"])
        if work is not None:
            if work.polls_left > 0:
                work.polls_left -= 1
            else:
                self._complete(params["task"])
        return json_reply(200, task)
