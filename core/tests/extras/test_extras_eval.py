"""``eval`` (SPEC-EXTRAS 8, eval): the built-in scenarios on the ledger and the overwrite store,
scenario files, signed reports and the command line."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from gatewaysim import seeded, write_keys

from agent_custody_state.extras import evalfile, evals
from agent_custody_state.extras.jsview import pretty
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.signing import digest_of


@pytest.fixture
def ledger(tmp_path: Path) -> Any:
    with Ledger(tmp_path / "eval.jsonl") as opened:
        yield evals.LedgerUnderTest(opened)


class AppendOnly:
    """A store that keeps both values on a supersede: the contradiction the metrics must see."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def write(self, item: dict[str, Any]) -> str:
        self.rows.append(item)
        return f"a{len(self.rows)}"

    def read(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {"subject": r["subject"], "predicate": r["predicate"], "value": r["value"]}
            for r in self.rows
            if r["subject"] == query["subject"]
            and r["predicate"] == query.get("predicate", r["predicate"])
        ]

    def retract(self, fact_id: str, actor: str, reason: str) -> None:
        return None


def test_the_ledger_on_the_builtins(ledger: Any) -> None:
    report = evals.run_all(ledger, evals.SCENARIOS)
    assert all(not s["failures"] for s in report["scenarios"])
    assert report["totals"] == {
        "reads": 10,
        "staleReads": 0,
        "contradictions": 0,
        "blastRadius": 3,
        "correctReads": 10,
    }
    assert [(s["reads"], s["correctReads"], s["blastRadius"]) for s in report["scenarios"]] == [
        (2, 2, 0),
        (2, 2, 0),
        (4, 4, 2),
        (2, 2, 1),
    ]
    assert (
        digest_of(evals.SCENARIOS)
        == "6d7df136087690848e6ba6637e73794ec1b483841d0f6de87d305e02b2f74b2d"
    )
    assert digest_of(report) == "a8146a1cd3673fc741d67f321542ff0ae19929ecc6f36c8c90b345b22ab7526c"
    assert list(report["scenarios"][0]) == [
        "name",
        "reads",
        "staleReads",
        "contradictions",
        "blastRadius",
        "correctReads",
        "failures",
    ]
    text = evals.format_report(report)
    assert len(text.splitlines()) == 5
    assert (
        text.splitlines()[-1]
        == "TOTAL" + " " * 71 + " reads 10  correct 10  stale  0  contradictions  0  blast  3"
    )


def test_the_overwrite_store_and_an_append_only_store() -> None:
    report = evals.run_all(evals.OverwriteStore(), evals.SCENARIOS)
    by_name = {s["name"].split(":")[0]: s for s in report["scenarios"]}
    assert (by_name["contradiction"]["correctReads"], by_name["contradiction"]["staleReads"]) == (
        1,
        0,
    )
    assert by_name["blast radius"]["correctReads"] == 2
    assert report["totals"]["correctReads"] < report["totals"]["reads"]
    assert report["totals"] == {
        "reads": 10,
        "staleReads": 0,
        "contradictions": 0,
        "blastRadius": 3,
        "correctReads": 7,
    }
    first = evals.run_scenario(AppendOnly(), evals.SCENARIOS[0])
    assert (first["contradictions"], first["staleReads"], first["correctReads"]) == (1, 1, 1)


def test_failures_are_scored_and_the_run_goes_on(ledger: Any) -> None:
    scenario = {
        "name": "x",
        "ops": [
            {"op": "retract", "key": "never-written"},
            {"op": "read", "subject": "x", "expect": None},
        ],
    }
    score = evals.run_scenario(ledger, scenario)
    assert score["failures"] == ["op 0 (retract): retract of unknown key never-written"]
    assert score["correctReads"] == 1
    ledger_error = {
        "name": "y",
        "ops": [
            {"op": "write", "key": "a", "subject": "s", "predicate": "p", "value": 1},
            {
                "op": "write",
                "key": "b",
                "subject": "s",
                "predicate": "q",
                "value": 2,
                "supersedes": "a",
            },
            {
                "op": "write",
                "key": "c",
                "subject": "s",
                "predicate": "p",
                "value": 3,
                "supersedes": "zz",
            },
        ],
    }
    failures = evals.run_scenario(ledger, ledger_error)["failures"]
    assert (
        failures[0]
        == "op 1 (write): a replacement must keep the subject and predicate of the fact it supersedes"
    )
    assert failures[1] == "op 2 (write): write c supersedes unknown key zz"
    # Equality is JSON text: 1 equals 1.0, key order matters.
    assert evals._same(1, 1.0) and not evals._same({"a": 1, "b": 2}, {"b": 2, "a": 1})


def scenario_file(tmp_path: Path, data: Any, name: str = "s.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_scenario_files(tmp_path: Path) -> None:
    good = {
        "version": "0.1",
        "scenarios": [
            {
                "name": "mine",
                "ops": [
                    {
                        "op": "write",
                        "key": "a",
                        "subject": "s",
                        "predicate": "p",
                        "value": 1,
                        "note": "dropped",
                    },
                    {"op": "read", "subject": "s", "predicate": "p", "expect": 1},
                ],
            }
        ],
    }
    loaded = evalfile.load_scenarios(scenario_file(tmp_path, good))
    assert [s["name"] for s in loaded] == ["mine"] and "note" not in loaded[0]["ops"][0]
    cases = [
        (
            {**good, "scenarios": [{"name": "m", "ops": [{"op": "read", "subject": "s"}]}]},
            "scenarios.0.ops.0.expect: Invalid input: expected nonoptional",
        ),
        ({**good, "scenarios": [{"name": "m", "ops": [{"op": "fly"}]}]}, r"scenarios\.0\.ops\.0"),
        ({**good, "version": "0.2"}, 'version: Invalid input: expected "0.1"'),
        (
            {"version": "0.1", "scenarios": []},
            "scenarios: Too small: expected array to have >=1 items",
        ),
        ([], r"\(root\): Invalid input: expected object, received array"),
        (
            {**good, "scenarios": [{"name": "", "ops": [{"op": "retract", "key": ""}]}]},
            "scenarios.0.name: Too small.*; scenarios.0.ops.0.key: Too small",
        ),
        (
            {
                **good,
                "scenarios": [
                    {
                        "name": "m",
                        "ops": [
                            {
                                "op": "write",
                                "key": "a",
                                "subject": "s",
                                "predicate": "p",
                                "value": 1,
                                "bad": "yes",
                            }
                        ],
                    }
                ],
            },
            "scenarios.0.ops.0.bad: Invalid input: expected boolean",
        ),
        ("{not json", "not JSON"),
    ]
    for data, message in cases:
        path = scenario_file(tmp_path, data)
        with pytest.raises(evalfile.ScenarioFileError, match=message) as info:
            evalfile.load_scenarios(path)
        assert str(info.value).startswith(f"scenario file {path}: ")


def test_signed_reports(tmp_path: Path, ledger: Any) -> None:
    key, other = seeded(3), seeded(4)
    report = evals.run_all(ledger, evals.SCENARIOS)
    envelope = evalfile.sign_report("ledger", evals.SCENARIOS, report, key)
    predicate, keyid, error = evalfile.verify_report(envelope, [key.public])
    assert error == "" and keyid == key.keyid
    assert predicate["report"]["totals"]["correctReads"] == predicate["report"]["totals"]["reads"]
    assert len(predicate["scenarioNames"]) == 4 and predicate["system"] == "ledger"
    assert evalfile.verify_report(envelope, [other.public])[0] is None
    flipped = copy.deepcopy(envelope)
    first = flipped["payload"][0]
    flipped["payload"] = {"A": "B", "B": "A"}.get(first, "A") + flipped["payload"][1:]
    assert evalfile.verify_report(flipped, [key.public])[0] is None
    statement = json.loads(base64.b64decode(envelope["payload"]))
    from agent_custody_state.extras.signed import sign_statement

    other_kind = sign_statement("eval:x", "https://example.com/other", statement["predicate"], key)
    assert (
        evalfile.verify_report(other_kind, [key.public])[2]
        == "not an eval report: https://example.com/other"
    )
    wrong_digest = sign_statement(
        "eval:x", evalfile.EVAL_REPORT_TYPE, statement["predicate"], key, digest_over={}
    )
    assert (
        evalfile.verify_report(wrong_digest, [key.public])[2]
        == "report digest does not match the subject"
    )


def test_cli(tmp_path: Path, cli: Cli) -> None:
    private, public = write_keys(seeded(3), tmp_path, "eval")
    _, other = write_keys(seeded(4), tmp_path, "other")
    out = tmp_path / "r.json"
    run = cli("eval", "--baseline", "--json", "--sign", private, "--out", out)
    assert run.code == 0 and run.err == f"signed report written to {out}\n"
    data = json.loads(run.out)
    assert run.out == pretty(data) + "\n" and list(data) == ["ledger", "baseline"]
    assert data["ledger"]["totals"]["correctReads"] == data["ledger"]["totals"]["reads"]
    assert data["baseline"]["totals"]["correctReads"] < data["baseline"]["totals"]["reads"]
    assert out.read_text() == pretty(json.loads(out.read_text()))
    run = cli("eval", "--verify", out, "--key", public)
    assert run.code == 0 and run.out.startswith(
        f"VERIFIED  signed by {seeded(3).keyid[:12]}  system agent-custody-ledger  ran "
    )
    assert run.out.splitlines()[0].endswith("scenarios 4 (digest 6d7df1360876)")
    assert run.out.splitlines()[-1].startswith("TOTAL")
    run = cli("eval", "--verify", out, "--key", other)
    assert run.code == 1 and run.out.startswith("NOT VERIFIED: no trusted key matches keyids")
    text = cli("eval", "--baseline")
    assert (
        text.code == 0
        and text.out.startswith("The ledger:\n")
        and "\n\nA naive overwrite store:\n" in text.out
    )
    stale = scenario_file(
        tmp_path,
        {
            "version": "0.1",
            "scenarios": [
                {
                    "name": "p",
                    "ops": [
                        {"op": "write", "key": "a", "subject": "s", "predicate": "p", "value": 1},
                        {"op": "read", "subject": "s", "predicate": "p", "expect": 2},
                    ],
                }
            ],
        },
    )
    run = cli("eval", "--scenarios", stale, "--json")
    assert run.code == 1 and json.loads(run.out)["ledger"]["totals"]["staleReads"] == 1
    assert [p.name for p in Path(tmp_path).glob("agent-custody-eval-*")] == []
