"""``EventBackendConformance``: the SPEC section 2 rules, persistence and reopen, for any backend.

Subclass it and provide ``store_factory``: a callable ``factory(name="ledger")`` that opens the
store for ``name`` (the same location every time it is called with the same name; a fresh, empty
location for a name not used before in the test)::

    class TestMyBackend(EventBackendConformance):
        @pytest.fixture
        def store_factory(self, tmp_path):
            return lambda name="ledger": MyStore(str(tmp_path / f"{name}.db"))

Every test has a rule id (``docs/conformance.md`` lists them) and a docstring whose second
paragraph says what to look at when it fails.

The rules come in groups, one module each: ``asserts`` (SPEC 2.1, 1.3), ``reads`` (2.2),
``mutations`` (2.3 to 2.9), ``persistence`` (reopen, sharing, unicode, atomicity),
``questions`` (every question of the backend asked directly, against the reference), ``shred``
(crypto-shred mode over the backend and its key store), ``shredmode`` (the mode recorded with
the ledger), ``chain`` (the tamper-evident chain: last event, stored events, forget, genesis,
checkpoints), and the property-based comparison with the reference backend (``..property``);
``base`` holds the fixtures they share. A backend whose default key store needs preparing
overrides the ``key_store_factory`` fixture (see ``shred``).
"""

from __future__ import annotations

from ..property import PropertyChecks
from .asserts import AssertRules
from .base import BackendRules, StoreFactory
from .certificates import CertificateRules
from .chain import ChainRules
from .mutations import MutationRules
from .persistence import PersistenceRules
from .questions import QuestionRules
from .reads import ReadRules
from .shred import KeyStoreFactory, ShredRules
from .shredmode import ShredModeRules

__all__ = ["BackendRules", "EventBackendConformance", "KeyStoreFactory", "StoreFactory"]


class EventBackendConformance(
    AssertRules,
    ReadRules,
    MutationRules,
    PersistenceRules,
    QuestionRules,
    ShredRules,
    ShredModeRules,
    ChainRules,
    CertificateRules,
    PropertyChecks,
):
    """The event-backend suite. Override ``store_factory``; everything else is inherited."""

    __suite_root__ = True
