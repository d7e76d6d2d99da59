"""What a removal's check reports (SPEC 4.3): ``verified`` once the store answers gone,
``stillIndexed`` if it answered and never said gone, ``unverified`` if it could not be asked:
every attempt at the check failed, so no answer says the store still holds the fact. Neither of
the last two makes a certificate ``complete``."""

from __future__ import annotations

import anyio
import pytest

from agent_custody_state import AssertRequest, Ledger
from agent_custody_state.ledger.model import Fact
from agent_custody_state.stores import StoreSet, VerifyPolicy
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore


class Checks(InProcessStore):
    """A store whose check answers from a script: True/False, or an exception to raise."""

    def __init__(self, name: str, script: list[object]) -> None:
        super().__init__(name)
        self.script = script
        self.asked = 0

    async def remove(self, external_id: str, fact: Fact) -> None:
        return None  # acknowledged; what the check answers is the script's

    async def verify_removed(self, external_id: str, fact: Fact) -> bool:
        answer = self.script[self.asked]
        self.asked += 1
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[return-value]  # a sloppy adapter's answer, as given


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ([ConnectionError("down")] * 3, "unverified"),
        ([ConnectionError("down"), False, ConnectionError("down")], "stillIndexed"),
        ([False, False, False], "stillIndexed"),
        ([ConnectionError("down"), True], "verified"),
        # A sloppy adapter's truthy answer is not a "gone" (seventh review): "yes", a list of
        # hits, None (a forgotten return) are no answer; a store never asked right is unverified.
        (["yes", ["hit"], None], "unverified"),
        (["no", False, 1], "stillIndexed"),
    ],
)
def test_a_check_that_could_never_be_asked_is_unverified(
    script: list[object], expected: str
) -> None:
    async def scenario() -> None:
        store = Checks("vectors", script)
        stores = StoreSet([store], VerifyPolicy(attempts=3, delay=0))
        with Ledger("memory:") as ledger:
            custody = Custody(ledger, stores)
            fact = (await custody.write(AssertRequest("acct:1", "plan", "pro", "org", "a"))).event
            done = await custody.forget(fact_id=fact.fact_id, actor="a", reason="r")
        assert done.removal.verification == {"vectors": expected}
        assert store.asked == len(script)

    anyio.run(scenario)
