"""``ReentrantTransactions``, the write section every builtin backend shares: the order of its
steps, nesting, failures in each step, and exclusion between threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from agent_custody_state.backends.jsonl import JsonlBackend
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.ledger.sections import ReentrantTransactions


class Recorder(ReentrantTransactions):
    """Records each step; ``fail`` names a step that raises."""

    def __init__(self, fail: str | None = None) -> None:
        self._init_transactions()
        self.steps: list[str] = []
        self.fail = fail

    def _step(self, name: str) -> None:
        self.steps.append(name)
        if self.fail == name:
            raise OSError(f"{name} failed")

    def _begin(self) -> None:
        self._step("begin")

    def _commit(self) -> None:
        self._step("commit")

    def _rollback(self) -> None:
        self._step("rollback")

    def _end(self) -> None:
        self._step("end")

    def append(self) -> None:
        self._require_transaction()
        self.steps.append("append")


def test_a_section_begins_commits_and_ends() -> None:
    tx = Recorder()
    with tx.transaction():
        tx.append()
    assert tx.steps == ["begin", "append", "commit", "end"]
    assert tx._depth == 0


def test_a_failing_body_rolls_back_and_propagates() -> None:
    tx = Recorder()
    with pytest.raises(KeyError), tx.transaction():
        tx.append()
        raise KeyError("boom")
    assert tx.steps == ["begin", "append", "rollback", "end"]


def test_a_failing_commit_rolls_back_and_propagates() -> None:
    tx = Recorder(fail="commit")
    with pytest.raises(OSError, match="commit failed"), tx.transaction():
        tx.append()
    assert tx.steps == ["begin", "append", "commit", "rollback", "end"]


def test_a_failing_begin_starts_nothing() -> None:
    """``_begin`` released what it took before raising: no rollback, no end, no body."""
    tx = Recorder(fail="begin")
    body: list[str] = []
    with pytest.raises(OSError, match="begin failed"), tx.transaction():
        body.append("ran")
    assert tx.steps == ["begin"] and body == [] and tx._depth == 0
    tx.fail = None
    with tx.transaction():
        tx.append()
    assert tx.steps[1:] == ["begin", "append", "commit", "end"]


def test_nested_sections_are_one() -> None:
    tx = Recorder()
    with tx.transaction():
        with tx.transaction():
            tx.append()
            assert tx._depth == 2
        assert tx._depth == 1
        tx.append()
    assert tx.steps == ["begin", "append", "append", "commit", "end"]


def test_an_error_in_a_nested_section_rolls_back_the_outer_one() -> None:
    tx = Recorder()
    with pytest.raises(KeyError), tx.transaction():
        tx.append()
        with tx.transaction():
            raise KeyError("inner")
    assert tx.steps == ["begin", "append", "rollback", "end"]


def test_append_outside_a_section_is_refused() -> None:
    with pytest.raises(RuntimeError, match="inside backend.transaction"):
        Recorder().append()


def test_sections_of_two_threads_do_not_overlap() -> None:
    tx = Recorder()
    inside = threading.Event()

    def hold() -> None:
        with tx.transaction():
            inside.set()
            time.sleep(0.2)
            tx.steps.append("first done")

    worker = threading.Thread(target=hold)
    worker.start()
    inside.wait(5)
    with tx.transaction():
        tx.steps.append("second")
    worker.join()
    assert tx.steps == ["begin", "first done", "commit", "end", "begin", "second", "commit", "end"]


@pytest.fixture(params=["memory", "jsonl"])
def builtin(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[ReentrantTransactions]:
    if request.param == "memory":
        backend: MemoryBackend | JsonlBackend = MemoryBackend()
    else:
        backend = JsonlBackend(f"{tmp_path}/l.jsonl")
    yield backend
    backend.close()


def test_the_builtin_backends_use_it(builtin: ReentrantTransactions) -> None:
    assert type(builtin).transaction is ReentrantTransactions.transaction
    with builtin.transaction():
        assert builtin._depth == 1
    with pytest.raises(RuntimeError, match="inside backend.transaction"):
        builtin.append([])  # type: ignore[attr-defined]
