"""Decoding stored events: a dict the decoder owns is taken apart in place, a caller's is not."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from agent_custody_state.ledger.model import event_from_dict, event_from_json

ASSERT: dict[str, Any] = {
    "eventId": "e1",
    "kind": "assert",
    "txTime": "2026-01-01T00:00:00.000Z",
    "fact": {
        "factId": "f1",
        "subject": "acct:42",
        "predicate": "plan",
        "value": {"tier": "pro", "seats": [1, 2]},
        "space": "org",
        "actor": "agent",
        "source": {"receiptId": "r1"},
        "provenance": "attested",
        "external": {"mem0": "m-1"},
        "validFrom": "2026-01-01T00:00:00.000Z",
        "validTo": None,
        "confidence": 0.5,
        "valueSalt": "c2FsdA==",
        "valueCommitment": "ab" * 32,
        "newerFactKey": [1],
    },
    "supersedes": None,
    "chain": {"seq": 3, "leaf": "cd" * 32, "head": "ef" * 32},
    "newerEventKey": True,
}
FORGOTTEN = copy.deepcopy(ASSERT)
FORGOTTEN["fact"].update(
    value=None, forgotten={"valueDigest": "d", "digestKind": "sha256", "at": "t"}
)
del FORGOTTEN["fact"]["valueSalt"]
RETRACT = {"eventId": "e2", "kind": "retract", "txTime": "t", "factId": "f1", "actor": "a",
           "reason": "r", "source": {"receiptId": None}, "chain": {"seq": 4}}  # fmt: skip


@pytest.mark.parametrize(
    "data", [ASSERT, FORGOTTEN, RETRACT], ids=["assert", "forgotten", "retract"]
)
def test_owned_and_copied_decoding_agree_and_a_callers_dict_is_left_alone(
    data: dict[str, Any],
) -> None:
    given = copy.deepcopy(data)
    copied = event_from_dict(given)
    assert given == data  # the caller's dict (and its fact) untouched
    owned = event_from_dict(copy.deepcopy(data), owned=True)
    from_text = event_from_json(json.dumps(data))
    assert copied == owned == from_text
    assert copied.to_dict() == owned.to_dict() == from_text.to_dict() == data
    assert list(owned.to_dict()) == list(data)  # unknown keys kept, in order


def test_an_owned_dict_missing_a_key_is_still_named() -> None:
    broken = copy.deepcopy(ASSERT)
    del broken["fact"]["subject"]
    with pytest.raises(ValueError, match="subject"):
        event_from_dict(broken, owned=True)
