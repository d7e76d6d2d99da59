"""``StoreConformance``: the write-through store rules (SPEC 4.2, 4.3, 6), for any store plugin.

Subclass it once per store plugin and provide fixtures::

    class TestMyStore(StoreConformance):
        capabilities = frozenset({"verify", "lag", "fail"})

        @pytest.fixture
        def store(self, vendor):            # a fresh, empty Store
            return MyStore(name="mine", client=vendor.client())

        @pytest.fixture
        def backdoor(self, vendor):         # reads the vendor WITHOUT the adapter
            return MyBackdoor(vendor)

        @pytest.fixture
        def lagging_store(self, vendor):    # only with "lag" in capabilities
            vendor.lag_checks = 2
            return MyStore(name="mine", client=vendor.client())

        @pytest.fixture
        def failing_store(self, vendor):    # only with "fail" in capabilities
            vendor.fail = True
            return MyStore(name="mine", client=vendor.client())

The backdoor has one method, ``find(fact_id)`` (plain or ``async``), returning what the vendor
holds for that fact as a dict, or ``None`` when it holds nothing:

- ``"id"`` (optional): the vendor's own id for the record; compared with what ``put`` returned.
- ``"text"`` and/or ``"value"``: the text line (SPEC 6: ``"<subject> <predicate>: <value>"``)
  and/or the structured value, whichever the vendor keeps (at least one).
- ``"metadata"``: the custody metadata as stored (``factId, space, actor, provenance,
  receiptId, validFrom, source``); extra keys are fine.

Find by the fact id, not by the vendor id: a store that deduplicates by content must still keep
two facts apart, and a removal is only proven when nothing carrying the fact id is left.

``capabilities`` decides which rules apply; a rule whose capability is missing is skipped with a
reason saying so (SQLAlchemy's requirement style):

- ``"verify"``: the store implements ``verify_removed``.
- ``"lag"``: a ``lagging_store`` fixture: after a removal the vendor keeps the item visible to
  at least the first ``verify_removed`` call, and gone within ``lag_max_checks`` calls.
- ``"fail"``: a ``failing_store`` fixture whose vendor answers every call with an error.
- ``"held"``: the store implements ``held_ids`` (its copies of a fact, by the fact id), so a
  copy a failed put left is found and removed.
- ``"relocate"``: a ``relocated_store`` fixture: the store built with another container
  setting (another graph, agent, table, user, namespace or server); both declare ``where``
  and the two texts differ.
- ``"late"``: a ``late_write`` fixture returning a ``LateWrite``: the vendor stores a write
  only after the store stopped waiting (``hold``, ``finish``); the store's ``held_ids``
  raises meanwhile (``LateWrite.on_fake`` builds one for a loopback fake).

A store that declares ``where`` (the container its copies go into, ``Store``) is held to a
secret-free, stable, one-line text whatever its capabilities.

Stores are async. Every rule is an ``async def`` test run by anyio's pytest plugin (installed
with anyio, which the core depends on) on asyncio; fixtures may be plain or ``async`` and share
the test's event loop, so an adapter may hold an async connection pool. Override the
``anyio_backend`` fixture to change the loop.

Every test has a rule id (``ST-...``, listed in ``docs/conformance.md``) and a docstring whose
second paragraph says what to look at when it fails. A plugin may deviate from a rule only by
overriding its test with ``@pytest.mark.xfail(reason=...)``.

The rules come in groups, one module each: ``writes`` (put), ``removal`` (remove, compensation,
the mirror flows), ``verification`` (verify, lag, vendor errors), ``orphans`` (a failed put
that kept the fact) and ``late`` (a write the vendor finishes late); ``base`` holds the fixtures,
helpers and test data they share.
"""

from __future__ import annotations

from .base import AWKWARD_VALUE, CAPABILITIES, StoreRules, make_fact
from .late import LateRules, LateWrite
from .orphans import OrphanRules, TimesOutAfterStoring
from .removal import RemovalRules
from .verification import VerificationRules
from .writes import WriteRules

__all__ = [
    "AWKWARD_VALUE",
    "CAPABILITIES",
    "LateWrite",
    "StoreConformance",
    "StoreRules",
    "TimesOutAfterStoring",
    "make_fact",
]


class StoreConformance(WriteRules, RemovalRules, VerificationRules, OrphanRules, LateRules):
    """The write-through store suite. Provide ``store`` and ``backdoor``; see the module doc."""

    __suite_root__ = True
