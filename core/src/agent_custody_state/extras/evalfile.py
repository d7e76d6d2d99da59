"""Scenario files and signed eval reports (SPEC-EXTRAS 6.5 and 6.6).

A team writes its own memory incidents as scenarios (``{"version": "0.1", "scenarios": [...]}``),
runs them on a schedule and hands a reviewer a report signed like a receipt. Validation reports
every problem at once as ``<dotted path | (root)>: <message>``; the paths are the original's
(zod's), the messages are modelled on its wording.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agent_custody_state.extras.jsview import at, has, parse, text
from agent_custody_state.extras.signed import open_signed, sign_statement
from agent_custody_state.signing import KeyPair, PublicKeyRef, digest_of
from agent_custody_state.timeutil import format_time, utc_now

EVAL_REPORT_TYPE = "https://agent-custody.dev/eval-report/v0.1"
SYSTEM = "agent-custody-ledger"


class ScenarioFileError(ValueError):
    """A scenario file that cannot be used; the message names the file and every problem."""


# Per op: key -> (required, kind); kinds: "text" (non-empty string), "bool", "any".
_OPS: dict[str, dict[str, tuple[bool, str]]] = {
    "write": {
        "key": (True, "text"),
        "subject": (True, "text"),
        "predicate": (True, "text"),
        "value": (True, "any"),
        "space": (False, "text"),
        "actor": (False, "text"),
        "supersedes": (False, "text"),
        "bad": (False, "bool"),
    },
    "read": {
        "subject": (True, "text"),
        "predicate": (False, "text"),
        "space": (False, "text"),
        "expect": (True, "any"),
    },
    "retract": {
        "key": (True, "text"),
        "actor": (False, "text"),
        "reason": (False, "text"),
    },
}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


class _Issues:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: list[str | int], message: str) -> None:
        self.items.append(f"{'.'.join(str(p) for p in path) or '(root)'}: {message}")


def _field(
    issues: _Issues, path: list[str | int], op: dict[str, Any], key: str, rule: tuple[bool, str]
) -> None:
    required, kind = rule
    where = [*path, key]
    if key not in op:
        if required:
            expected = (
                "nonoptional" if kind == "any" else ("boolean" if kind == "bool" else "string")
            )
            issues.add(where, f"Invalid input: expected {expected}, received undefined")
        return
    value = op[key]
    if kind == "bool" and not isinstance(value, bool):
        issues.add(where, f"Invalid input: expected boolean, received {_kind(value)}")
    elif kind == "text" and not isinstance(value, str):
        issues.add(where, f"Invalid input: expected string, received {_kind(value)}")
    elif kind == "text" and not value:
        issues.add(where, "Too small: expected string to have >=1 characters")


def _op(issues: _Issues, path: list[str | int], op: Any) -> dict[str, Any] | None:
    if not isinstance(op, dict):
        issues.add(path, f"Invalid input: expected object, received {_kind(op)}")
        return None
    kind = op.get("op")
    rules = _OPS.get(kind) if isinstance(kind, str) else None
    if rules is None:
        issues.add(
            [*path, "op"], "Invalid discriminator value. Expected 'write' | 'read' | 'retract'"
        )
        return None
    before = len(issues.items)
    for key, rule in rules.items():
        _field(issues, path, op, key, rule)
    if len(issues.items) > before:
        return None
    # Unknown keys are dropped, as the original's schema drops them.
    return {"op": op["op"], **{k: op[k] for k in rules if k in op}}


def validate_scenarios(data: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """``(scenarios, issues)``; the scenarios are usable only when there are no issues."""
    issues = _Issues()
    out: list[dict[str, Any]] = []
    if not isinstance(data, dict):
        issues.add([], f"Invalid input: expected object, received {_kind(data)}")
        return out, issues.items
    if data.get("version") != "0.1":
        issues.add(["version"], 'Invalid input: expected "0.1"')
    scenarios = data.get("scenarios")
    if not isinstance(scenarios, list):
        issues.add(
            ["scenarios"],
            f"Invalid input: expected array, received {_kind(scenarios) if 'scenarios' in data else 'undefined'}",
        )
        return out, issues.items
    if not scenarios:
        issues.add(["scenarios"], "Too small: expected array to have >=1 items")
    for si, scenario in enumerate(scenarios):
        path: list[str | int] = ["scenarios", si]
        if not isinstance(scenario, dict):
            issues.add(path, f"Invalid input: expected object, received {_kind(scenario)}")
            continue
        name = scenario.get("name")
        if not isinstance(name, str):
            got = _kind(name) if "name" in scenario else "undefined"
            issues.add([*path, "name"], f"Invalid input: expected string, received {got}")
        elif not name:
            issues.add([*path, "name"], "Too small: expected string to have >=1 characters")
        ops = scenario.get("ops")
        if not isinstance(ops, list):
            got = _kind(ops) if "ops" in scenario else "undefined"
            issues.add([*path, "ops"], f"Invalid input: expected array, received {got}")
            continue
        if not ops:
            issues.add([*path, "ops"], "Too small: expected array to have >=1 items")
        checked = [_op(issues, [*path, "ops", oi], op) for oi, op in enumerate(ops)]
        out.append({"name": name, "ops": checked})
    return out, issues.items


def load_scenarios(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read and validate a scenario file; ``ScenarioFileError`` names every problem."""
    raw = Path(path).read_bytes()  # OSError goes up as is: the CLI names the file
    try:
        data = parse(raw)
    except ValueError as exc:
        raise ScenarioFileError(f"scenario file {path}: not JSON ({exc})") from None
    scenarios, issues = validate_scenarios(data)
    if issues:
        raise ScenarioFileError(f"scenario file {path}: {'; '.join(issues)}")
    return scenarios


def sign_report(
    system: str, scenarios: list[dict[str, Any]], report: dict[str, Any], key: KeyPair
) -> dict[str, Any]:
    predicate = {
        "system": system,
        "scenariosDigest": digest_of(scenarios),
        "scenarioNames": [s["name"] for s in scenarios],
        "report": report,
        "ranAt": format_time(utc_now()),
    }
    return sign_statement(f"eval:{system}", EVAL_REPORT_TYPE, predicate, key, digest_over=report)


def verify_report(envelope: Any, keys: list[PublicKeyRef]) -> tuple[Any, str, str]:
    """``(predicate, keyid, "")`` when the report verifies, else ``(None, "", error)``;
    ``SignedTooDeep`` when its payload nests too deep to read."""
    result = open_signed(envelope, keys)
    if not result.ok:
        return None, "", result.error
    statement = result.payload
    predicate = at(statement, "predicate")
    kind = at(statement, "predicateType")
    if kind != EVAL_REPORT_TYPE or not isinstance(predicate, dict):
        shown = text(kind) if has(statement, "predicateType") else "undefined"
        return None, "", f"not an eval report: {shown}"
    if at(statement, "subject", 0, "digest", "sha256") != digest_of(predicate.get("report")):
        return None, "", "report digest does not match the subject"
    return predicate, result.keyid, ""
