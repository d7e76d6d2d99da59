"""Talking to ``data/upstream_rules.js``: the original's rules for the signed files, run by Node.

``signed_items`` builds the three signed artefacts of the worked fixture with fixed times (an
action pack, a custody pack, an eval report), so the same inputs signed by Node and by us must
give byte-identical envelopes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import worked

from agent_custody_state.extras import evals
from agent_custody_state.extras.actionpack import ACTION_PACK_TYPE
from agent_custody_state.extras.evalfile import EVAL_REPORT_TYPE, SYSTEM
from agent_custody_state.extras.explain import build_action_pack
from agent_custody_state.extras.pack import PACK_TYPE, build_pack
from agent_custody_state.ledger.ledger import Ledger

DATA = Path(__file__).parent / "data"
RULES = DATA / "upstream_rules.js"
VECTORS = DATA / "upstream_vectors.json"
AT = "2026-09-01T12:00:00.000Z"
NO_NODE = "node is not installed on this machine, so the live comparison with JavaScript cannot run"


def have_node() -> bool:
    return shutil.which("node") is not None


def node(request: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        ["node", str(RULES)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return dict(json.loads(done.stdout))


def signed_items(fixture: worked.Worked) -> list[dict[str, Any]]:
    """``{kind, subject, predicateType, predicate, digestOver?}`` for each signed artefact."""
    with Ledger(fixture.ledger) as ledger:
        action = build_action_pack(fixture.receipts, worked.R1, ledger)
        custody = build_pack(ledger, fixture.receipts, worked.F1)
        report = evals.run_all(evals.OverwriteStore(), evals.SCENARIOS)
    action["generatedAt"] = custody["generatedAt"] = AT
    eval_predicate = {
        "system": SYSTEM,
        "scenariosDigest": "6d7df136087690848e6ba6637e73794ec1b483841d0f6de87d305e02b2f74b2d",
        "scenarioNames": [s["name"] for s in evals.SCENARIOS],
        "report": report,
        "ranAt": AT,
    }
    return [
        {
            "kind": "action-pack",
            "subject": f"action-pack:{worked.R1}",
            "predicateType": ACTION_PACK_TYPE,
            "predicate": action,
        },
        {
            "kind": "custody-pack",
            "subject": f"custody-pack:{worked.F1}",
            "predicateType": PACK_TYPE,
            "predicate": custody,
        },
        {
            "kind": "eval-report",
            "subject": f"eval:{SYSTEM}",
            "predicateType": EVAL_REPORT_TYPE,
            "predicate": eval_predicate,
            "digestOver": report,
        },
    ]
