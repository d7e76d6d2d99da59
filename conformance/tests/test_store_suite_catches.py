"""The store suite is honest: run on deliberately broken stores, the right rules fail.

Each case runs the suite in a child pytest (pytester) against the reference store with one
defect, and checks which rule ids fail; a suite that passed a broken store would be worthless.
"""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

HEADER = """
import pytest
from agent_custody_state.stores.inprocess import MemoryVendor, InProcessStore
from agent_custody_state.stores import StoreError
from agent_custody_state_conformance.stores import StoreConformance


class Backdoor:
    def __init__(self, vendor):
        self.vendor = vendor

    def find(self, fact_id):
        for rid, r in self.vendor.rows.items():
            if r["metadata"]["factId"] == fact_id:
                return {"id": rid, **r}
        return None


class Suite(StoreConformance):
    capabilities = frozenset({"verify", "fail", "lag", "held"})

    @pytest.fixture
    def vendor(self):
        return MemoryVendor()

    @pytest.fixture
    def store(self, vendor):
        return Broken("memory", vendor)

    @pytest.fixture
    def backdoor(self, vendor):
        return Backdoor(vendor)

    @pytest.fixture
    def lagging_store(self):
        return Broken("memory", MemoryVendor(lag_checks=2))

    @pytest.fixture
    def failing_store(self):
        return Broken("memory", MemoryVendor(fail=True))


class TestBroken(Suite):
    pass
"""

CASES = {
    # refusal names long values, but put takes them: a write it refuses is still written.
    "refusal_put_ignores_it": (
        "class Broken(InProcessStore):\n"
        "    def refusal(self, fact):\n"
        "        return 'too long' if len(str(fact.value)) > 50_000 else None\n",
        {"test_refusal_agrees_with_put"},
    ),
    # put refuses long values that refusal does not name: refused only after earlier stores.
    "refusal_misses_a_limit": (
        "class Broken(InProcessStore):\n"
        "    def refusal(self, fact):\n"
        "        return None\n"
        "    async def put(self, fact):\n"
        "        if len(str(fact.value)) > 50_000:\n"
        "            raise StoreError(self.name, 'too long')\n"
        "        return await super().put(fact)\n",
        {"test_refusal_agrees_with_put"},
    ),
    # refusal answers an empty text: neither a reason nor None (a store set takes it as a
    # refusal of every fact, so the rules writing through one fail too).
    "refusal_answers_empty": (
        "class Broken(InProcessStore):\n    def refusal(self, fact):\n        return ''\n",
        {
            "test_refusal_agrees_with_put",
            "test_compensation_removes_the_write",
            "test_copy_left_by_a_failed_put_is_removed",
            "test_mirror_swaps_and_restores",
        },
    ),
    # remove does nothing: the record stays.
    "remove_is_a_no_op": (
        "class Broken(InProcessStore):\n"
        "    async def remove(self, external_id, fact):\n"
        "        return None\n",
        {
            "test_remove_makes_backdoor_miss",
            "test_remove_is_idempotent",
            "test_equal_text_removed_separately",
            "test_compensation_removes_the_write",
            "test_verify_agrees_with_backdoor",
            "test_mirror_swaps_and_restores",
            "test_lagging_index",
            "test_vendor_errors_name_the_store",
            "test_verify_sees_every_copy",
            "test_verify_without_the_value",
            "test_held_ids_names_the_copies_of_a_fact",
            "test_copy_left_by_a_failed_put_is_removed",
            "test_text_no_store_can_hold_is_put_and_removed",
        },
    ),
    # held_ids never finds anything: a copy a failed put left stays.
    "held_ids_finds_nothing": (
        "class Broken(InProcessStore):\n    async def held_ids(self, fact):\n        return []\n",
        {
            "test_held_ids_names_the_copies_of_a_fact",
            "test_held_ids_raises_when_the_vendor_fails",
            "test_copy_left_by_a_failed_put_is_removed",
        },
    ),
    # held_ids answers [] when the vendor fails: "no copy" is promised without asking.
    "held_ids_swallows_errors": (
        "class Broken(InProcessStore):\n"
        "    async def held_ids(self, fact):\n"
        "        try:\n"
        "            return await super().held_ids(fact)\n"
        "        except StoreError:\n"
        "            return []\n",
        {"test_held_ids_raises_when_the_vendor_fails"},
    ),
    # held_ids also names another fact's record in the same space: the cleanup of a failed
    # put would remove a copy that belongs to that other fact.
    "held_ids_names_a_neighbour": (
        "class Broken(InProcessStore):\n"
        "    async def held_ids(self, fact):\n"
        "        ids = await super().held_ids(fact)\n"
        "        others = [rid for rid, r in self.vendor.rows.items()\n"
        "                  if r['metadata']['space'] == fact.space and rid not in ids]\n"
        "        return ids + others[:1] if ids else ids\n",
        {"test_held_ids_names_the_copies_of_a_fact"},
    ),
    # astral-plane characters replaced on the way in.
    "loses_astral_characters": (
        "class Broken(InProcessStore):\n"
        "    async def put(self, fact):\n"
        "        rid = await super().put(fact)\n"
        "        row = self.vendor.rows[rid]\n"
        "        row['text'] = ''.join(c if ord(c) < 0x10000 else '?' for c in row['text'])\n"
        "        return rid\n",
        {"test_awkward_value_round_trip"},
    ),
    # verification reads by id only: another record of the fact goes unseen.
    "verify_by_id_only": (
        "class Broken(InProcessStore):\n"
        "    async def verify_removed(self, external_id, fact):\n"
        "        try:\n"
        "            return self.vendor.get(external_id) is None\n"
        "        except Exception as exc:\n"
        "            raise StoreError(self.name, str(exc)) from exc\n",
        {"test_lagging_index", "test_verify_sees_every_copy"},
    ),
    # verification answers "gone" without asking.
    "verify_always_true": (
        "class Broken(InProcessStore):\n"
        "    async def verify_removed(self, external_id, fact):\n"
        "        return True\n",
        {
            "test_verify_agrees_with_backdoor",
            "test_equal_text_removed_separately",
            "test_lagging_index",
            "test_vendor_errors_name_the_store",
            "test_verify_sees_every_copy",
            "test_verify_without_the_value",
        },
    ),
    # deduplicates by text: equal texts share one record and one id.
    "dedupes_by_text": (
        "class Broken(InProcessStore):\n"
        "    async def put(self, fact):\n"
        "        from agent_custody_state.stores import fact_text\n"
        "        for rid, r in self.vendor.rows.items():\n"
        "            if r['text'] == fact_text(fact):\n"
        "                return rid\n"
        "        return await super().put(fact)\n",
        {
            "test_equal_text_removed_separately",
            "test_put_custody_metadata",
            "test_held_ids_names_the_copies_of_a_fact",
        },
    ),
    # vendor errors are swallowed and reported as success.
    "swallows_errors": (
        "class Broken(InProcessStore):\n"
        "    async def put(self, fact):\n"
        "        try:\n"
        "            return await super().put(fact)\n"
        "        except StoreError:\n"
        "            return 'pretend-id'\n",
        {"test_vendor_errors_name_the_store"},
    ),
    # custody metadata dropped.
    "drops_custody": (
        "class Broken(InProcessStore):\n"
        "    async def put(self, fact):\n"
        "        rid = await super().put(fact)\n"
        "        self.vendor.rows[rid]['metadata'].pop('receiptId')\n"
        "        return rid\n",
        {"test_put_custody_metadata", "test_text_no_store_can_hold_is_put_and_removed"},
    ),
    # custody metadata with the raw actor: U+0000 in it, which a PostgreSQL-backed vendor refuses.
    "keeps_the_raw_actor": (
        "class Broken(InProcessStore):\n"
        "    async def put(self, fact):\n"
        "        rid = await super().put(fact)\n"
        "        self.vendor.rows[rid]['metadata']['actor'] = fact.actor\n"
        "        return rid\n",
        {"test_text_no_store_can_hold_is_put_and_removed"},
    ),
    # residual windows that carry a connection URL's password into every certificate.
    "residual_leaks_a_password": (
        "class Broken(InProcessStore):\n"
        "    residual = [{'where': 'postgresql://app:hunter2@db/x WAL', 'until': 'recycled'}]\n",
        {"test_residual_windows_are_texts_without_secrets"},
    ),
    # residual windows of another shape (certified as undeclared).
    "residual_of_another_shape": (
        "class Broken(InProcessStore):\n    residual = ['the WAL, until recycled']\n",
        {"test_residual_windows_are_texts_without_secrets"},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_broken_store_fails_the_right_rules(pytester: pytest.Pytester, case: str) -> None:
    defect, expected = CASES[case]
    pytester.makepyfile(test_broken=HEADER + "\n\n" + defect)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "-p", "no:randomly")
    failed = set(re.findall(r"FAILED \S+::TestBroken::(\w+)", result.stdout.str()))
    assert failed == expected, result.stdout.str()[-3000:]


def test_the_reference_store_passes_cleanly(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ok=HEADER + "\n\nBroken = InProcessStore\n")
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    # ST-6-where, ST-6-where-moves: no where; ST-4.2-refusal: no refusal; ST-4.2-late*: no
    # late_write
    result.assert_outcomes(passed=20, skipped=7)
