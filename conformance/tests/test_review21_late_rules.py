"""The late-write rules (``ST-4.2-late*``) pass a store that keeps its doubt, and fail one that
drops it: answers "no copy left" while the vendor may still store the write, doubts a write the
vendor refused, or does not say how long it doubts.

Each case runs the suite in a child pytest (pytester) against an in-process store whose vendor
can hold a write and store it later, with a ``late_write`` built from plain callables (no fake
server), and checks which rules fail.
"""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

MODULE = """
import contextlib

import pytest
from agent_custody_state.plugin import Unanswered
from agent_custody_state.stores import StoreError
from agent_custody_state.stores.inprocess import InProcessStore, MemoryVendor
from agent_custody_state.stores import custody_metadata, fact_text
from agent_custody_state_conformance.stores import LateWrite, StoreConformance
from agent_custody_state_conformance.stores.late import SettleClock


class Answer(Exception):
    def __init__(self, status):
        super().__init__(f"HTTP {status}")
        self.status = status


class LateVendor(MemoryVendor):
    def __init__(self):
        super().__init__()
        self.later, self.refuse, self.held = 0, False, []

    def finish(self):
        for record in self.held:
            self.insert(record)
        self.held = []


class LateStore(InProcessStore):
    status_of = staticmethod(lambda exc: getattr(exc, "status", None))

    def __init__(self, vendor, clock):
        super().__init__("late", vendor)
        self.unanswered = Unanswered(30.0, clock=clock)
        self.settle_seconds = 30.0

    async def put(self, fact):
        record = {"text": fact_text(fact), "value": fact.value, "metadata": custody_metadata(fact)}
        try:
            with self.unanswered.sending(fact.fact_id, status_of=self.status_of):
                if self.vendor.refuse:
                    raise Answer(400)
                if self.vendor.later:
                    self.vendor.later -= 1
                    self.vendor.held.append(record)
                    raise Answer(504)
        except Answer as exc:
            raise StoreError(self.name, str(exc)) from exc
        return self.vendor.insert(record)

    async def held_ids(self, fact):
        held = await super().held_ids(fact)
        if self.unanswered.doubt(fact.fact_id, held) is not None:
            raise StoreError(self.name, f"a write of fact {fact.fact_id} may still land")
        return held


class Backdoor:
    def __init__(self, vendor):
        self.vendor = vendor

    def find(self, fact_id):  # the vendor's own search (no lag here), not the store's
        hits = self.vendor.search(factId=fact_id)
        return {"id": hits[0][0], **hits[0][1]} if hits else None


class TestLate(StoreConformance):
    capabilities = frozenset({"verify", "held", "late"})

    @pytest.fixture
    def vendor(self):
        return LateVendor()

    @pytest.fixture
    def clock(self):
        return SettleClock()

    @pytest.fixture
    def store(self, vendor, clock):
        return Broken(vendor, clock)

    @pytest.fixture
    def backdoor(self, vendor):
        return Backdoor(vendor)

    @pytest.fixture
    def late_write(self, vendor, clock, store):
        def hold():
            vendor.later += 1

        @contextlib.contextmanager
        def refusing():
            vendor.refuse = True
            yield
            vendor.refuse = False

        return LateWrite(
            store, hold, vendor.finish, refusing, clock.advance, doubt="may still land"
        )
"""

LATE = "test_a_write_finished_late_is_never_reported_as_no_copy"
SETTLES = "test_the_doubt_ends_after_settle_seconds"
REFUSED = "test_a_refused_write_leaves_no_doubt"
RULES = (LATE, SETTLES, REFUSED)

CASES = {
    "keeps_its_doubt": ("class Broken(LateStore):\n    pass\n", set()),
    # held_ids answers the lookup as is: "no copy left" while the vendor still holds the write.
    "ignores_the_doubt": (
        "class Broken(LateStore):\n"
        "    async def held_ids(self, fact):\n"
        "        return await InProcessStore.held_ids(self, fact)\n",
        {LATE, SETTLES},
    ),
    # every failure counts as unanswered, a 4xx too: a refused write is doubted for 30s.
    "doubts_a_refusal": (
        "class Broken(LateStore):\n    status_of = staticmethod(lambda exc: None)\n",
        {REFUSED},
    ),
    # the doubt lasts longer than the settle time the store declares (resume trusts it).
    "declares_a_shorter_settle_time": (
        "class Broken(LateStore):\n"
        "    def __init__(self, vendor, clock):\n"
        "        super().__init__(vendor, clock)\n"
        "        self.settle_seconds = 10.0\n",
        {SETTLES},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_late_rules_fail_exactly_the_broken_stores(pytester: pytest.Pytester, case: str) -> None:
    defect, expected = CASES[case]
    pytester.makepyfile(test_late=MODULE + "\n\n" + defect)
    result = pytester.runpytest_subprocess(
        "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-k", " or ".join(RULES)
    )
    out = result.stdout.str()
    failed = set(re.findall(r"FAILED \S+::TestLate::(\w+)", out))
    assert failed == expected, out[-3000:]
    passed = int(re.search(r"(\d+) passed", out).group(1)) if " passed" in out else 0
    assert passed == 3 - len(expected), out[-3000:]
