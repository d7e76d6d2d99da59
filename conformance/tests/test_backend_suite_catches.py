"""The event-backend suite is honest: run on deliberately broken backends, the right rules fail.

Each case breaks ``tinyjson.TinyJsonBackend`` (a correct backend built only from the plugin
author's module, as a third party would write it) in one way, and checks that the suite fails
the rules named, with a message naming the rule where the rule writes one. The suite takes
seconds per backend, so every case runs in one child pytest (the property comparison left out:
it is slow, and no case relies on it); a second child runs the whole suite on the intact
backend, which must pass.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent

HEADER = """
import pytest
from tinyjson import TinyJsonBackend
from agent_custody_state.plugin import AssertEvent, forget_assert
from agent_custody_state_conformance import EventBackendConformance

{defect}

class TestBroken(EventBackendConformance):
    @pytest.fixture
    def store_factory(self, tmp_path):
        return lambda name="ledger": Broken(str(tmp_path / f"{{name}}.tinyjson"))
"""

#: Keeps the asserts a forget rewrote as they were, for the read named in ``.format(read=...)``.
KEEPS_FORGOTTEN = """
class Broken(TinyJsonBackend):
    originals = {{}}
    def forget(self, fact_id, forgotten, event):
        for e in self._pending:
            if isinstance(e, AssertEvent) and e.fact_id == fact_id:
                self.originals[e.event_id] = e
        super().forget(fact_id, forgotten, event)
    def {read}(self, ids):
        return [self.originals.get(e.event_id, e) for e in super().{read}(ids)]
"""

#: case -> (the defect: a class ``Broken``, {test that must fail: text its failure must show}).
CASES: dict[str, tuple[str, dict[str, str | None]]] = {
    # tx_at taken as strict: a read at an event's own txTime misses it.
    "tx_at_exclusive": (
        "class Broken(TinyJsonBackend):\n"
        "    def find_asserts(self, *, tx_at=None, tx_before=None, **kw):\n"
        "        return super().find_asserts(tx_before=tx_at or tx_before, **kw)\n",
        {"test_as_of_at_an_exact_tx_time": "EB-2.2-tx-edge: as_of(tx_at="},
    ),
    # tx_at ignored altogether: reads in the past see the present.
    "ignores_tx_at": (
        "class Broken(TinyJsonBackend):\n"
        "    def find_asserts(self, *, tx_at=None, **kw):\n"
        "        return super().find_asserts(**kw)\n",
        {"test_as_of_bitemporal": None, "test_as_of_at_an_exact_tx_time": None},
    ),
    # astral-plane characters replaced when the file is read back.
    "loses_astral_characters": (
        "from agent_custody_state.plugin import event_from_json\n"
        "class Broken(TinyJsonBackend):\n"
        "    def _load(self):\n"
        "        if self._pending is not None or not self.path.exists():\n"
        "            return super()._load()\n"
        "        text = self.path.read_text(encoding='utf-8')\n"
        "        text = ''.join(c if ord(c) < 0x10000 else '\\ufffd' for c in text)\n"
        "        return [event_from_json(line) for line in text.split('\\n') if line]\n",
        {"test_awkward_text_survives_reopen": "EB-P-unicode: the events read back differ"},
    ),
    # superseders newest first: the ledger takes the live one either way, so only a direct
    # question shows it.
    "superseders_newest_first": (
        "class Broken(TinyJsonBackend):\n"
        "    def superseders(self, ids):\n"
        "        return list(reversed(super().superseders(ids)))\n",
        {"test_questions_answer_as_the_reference": "EB-Q-answers: superseders([b])"},
    ),
    # get_assert answers with the newest assert of the chain, not the fact's own.
    "get_assert_answers_the_superseder": (
        "class Broken(TinyJsonBackend):\n"
        "    def get_assert(self, fact_id):\n"
        "        found = None\n"
        "        for e in self._asserts():\n"
        "            if fact_id in (e.fact_id, e.supersedes):\n"
        "                found = e\n"
        "        return found\n",
        {"test_questions_answer_as_the_reference": "EB-Q-answers: get_assert(a)"},
    ),
    # last_tx_time answers the first event's time (unused by the ledger unless it locks keys).
    "last_tx_time_of_the_first_event": (
        "class Broken(TinyJsonBackend):\n"
        "    def last_tx_time(self):\n"
        "        first = self.first_event()\n"
        "        return None if first is None else first.tx_time\n",
        {"test_questions_answer_as_the_reference": "EB-Q-answers: last_tx_time()"},
    ),
    # a forgotten superseder keeps its value in the superseders answer.
    "superseders_keep_a_forgotten_value": (
        KEEPS_FORGOTTEN.format(read="superseders"),
        {"test_questions_answer_as_the_reference": "EB-Q-answers: superseders([e])"},
    ),
    # a forgotten fact keeps its value in events_for (and so in events_around, built on it).
    "events_for_keeps_a_forgotten_value": (
        KEEPS_FORGOTTEN.format(read="events_for"),
        {"test_questions_answer_as_the_reference": "EB-Q-answers: events_around([e])"},
    ),
    # forget writes its rewrite to the file at once, ahead of the section's commit.
    "forget_rewrite_ahead_of_the_section": (
        "class Broken(TinyJsonBackend):\n"
        "    def forget(self, fact_id, forgotten, event):\n"
        "        super().forget(fact_id, forgotten, event)\n"
        "        rewritten = [e for e in self._pending if e is not event]\n"
        "        self.path.write_text(''.join(e.to_json() + '\\n' for e in rewritten))\n",
        {"test_failed_forget_is_whole_or_absent": "EB-P-atomic-forget: after the failed"},
    ),
    # reopening drops the last event.
    "drops_the_last_event_on_reopen": (
        "class Broken(TinyJsonBackend):\n"
        "    def __init__(self, location, **kw):\n"
        "        super().__init__(location, **kw)\n"
        "        self.opened = super()._load()[:-1]\n"
        "    def _load(self):\n"
        "        return self._pending if self._pending is not None else self.opened\n"
        "    def _commit(self):\n"
        "        super()._commit()\n"
        "        self.opened = list(self._pending)\n",
        {"test_reopen": None},
    ),
    # a write section starts from this instance's last commit: another's write is lost.
    "loses_a_concurrent_write": (
        "class Broken(TinyJsonBackend):\n"
        "    mine = None\n"
        "    def _begin(self):\n"
        "        super()._begin()\n"
        "        if self.mine is not None:\n"
        "            self._pending = list(self.mine)\n"
        "    def _commit(self):\n"
        "        super()._commit()\n"
        "        self.mine = list(self._pending)\n",
        {"test_two_instances_share": None},
    ),
    # appends acknowledged and kept in memory only.
    "append_acknowledged_not_persisted": (
        "class Broken(TinyJsonBackend):\n"
        "    def __init__(self, location, **kw):\n"
        "        super().__init__(location, **kw)\n"
        "        self.memory = super()._load()\n"
        "    def _load(self):\n"
        "        return self._pending if self._pending is not None else self.memory\n"
        "    def _commit(self):\n"
        "        self.memory = list(self._pending)\n",
        {"test_reopen": None, "test_two_instances_share": None},
    ),
}


def _run(folder: Path, *args: str) -> str:
    """Run pytest in ``folder`` (a child process) and return what it printed."""
    (folder / "tinyjson.py").write_text((HERE / "tinyjson.py").read_text())
    env = {**os.environ, "COLUMNS": "400"}
    command = [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", *args]
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def broken_run(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("broken")
    for case, (defect, _) in CASES.items():
        (folder / f"test_{case}.py").write_text(HEADER.format(defect=defect))
    return _run(folder, "-p", "no:randomly", "-k", "not test_matches_reference")


@pytest.mark.parametrize("case", sorted(CASES))
def test_broken_backend_fails_the_rule(broken_run: str, case: str) -> None:
    _, expected = CASES[case]
    failed = set(re.findall(rf"FAILED test_{case}\.py::TestBroken::(\w+)", broken_run))
    missing = set(expected) - failed
    assert not missing, f"{case}: {sorted(missing)} passed; failed: {sorted(failed)}"
    for test, shown in expected.items():
        if shown is not None:
            lines = re.findall(rf"FAILED test_{case}\.py::TestBroken::{test} - (.*)", broken_run)
            assert any(shown in line for line in lines), f"{case}: {test} failed with {lines}"


def test_the_intact_backend_passes(tmp_path: Path) -> None:
    (tmp_path / "test_intact.py").write_text(HEADER.format(defect="Broken = TinyJsonBackend"))
    output = _run(tmp_path)
    summary = output.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "failed" not in summary, output[-3000:]
    assert "error" not in summary, output[-3000:]
