"""The five commands on bad input: the original's one-line errors (exit 1), usage errors (exit 2),
and nothing created or changed; and ``blast --retract``, which the original does not have."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import worked
from conftest import Cli
from worked import F1, F2, R3

from agent_custody_state.extras.jsview import pretty
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.ledger.model import AssertEvent, Fact

Snapshot = Callable[[Path], dict[str, bytes]]


def one_line(err: str) -> str:
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["blast", "--ledger", "L"], "error: blast needs --ledger, --receipts, and --fact"),
        (
            ["explain", "--receipts", "D"],
            "error: explain needs --receipts and --receipt, or --verify",
        ),
        (["explain", "--verify", "X"], "error: explain --verify needs --key <pub>"),
        (
            ["explain", "--receipts", "D", "--receipt", "R", "--out", "O"],
            "error: explain --out needs --sign <key>",
        ),
        (
            ["pack", "--ledger", "L", "--receipts", "D", "--fact", "F"],
            "error: pack needs --ledger, --receipts, --fact, --out, and --sign",
        ),
        (["pack", "--verify", "X"], "error: pack --verify needs --key <pub>"),
        (["review"], "error: review needs --receipts"),
        (["eval", "--verify", "X"], "error: eval --verify needs --key <pub>"),
        (["eval", "--sign", "K"], "error: eval --sign needs --out <report.json>"),
        (
            ["blast", "--ledger", "L", "--receipts", "D", "--fact", "F", "--apply"],
            "error: blast --apply needs --retract",
        ),
    ],
)
def test_missing_flags(
    cli: Cli, tmp_path: Path, snapshot: Snapshot, argv: list[str], message: str
) -> None:
    before = snapshot(tmp_path)
    run = cli(*(str(tmp_path / a) if a in {"L", "D", "X", "O", "K"} else a for a in argv))
    assert (run.code, run.out, run.err) == (1, "", message + "\n")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["blast", "--ledger", "L", "--receipts", "D", "--fact", "F", "--bogus"],
        ["blast", "--led", "L", "--receipts", "D", "--fact", "F"],  # no abbreviations
        ["explain", "positional"],
        ["review", "--receipts", "D", "--port", "eighty"],
        ["eval", "--json=yes"],
    ],
)
def test_usage_errors_exit_2(cli: Cli, argv: list[str]) -> None:
    run = cli(*argv)
    assert run.code == 2 and run.out == "" and "usage: agent-custody-memory" in run.err


def test_missing_and_bad_files(
    cli: Cli, fixture18: worked.Worked, tmp_path: Path, snapshot: Snapshot
) -> None:
    def state() -> tuple[object, ...]:
        keys = snapshot(fixture18.root / "keys")
        return snapshot(fixture18.receipts), keys, fixture18.ledger.read_bytes()

    before = state()
    where = ["--ledger", fixture18.ledger, "--receipts", fixture18.receipts]
    run = cli(
        "blast", "--ledger", tmp_path / "typo.jsonl", "--receipts", fixture18.receipts, "--fact", F1
    )
    assert "no such ledger" in one_line(run.err) and run.code == 1
    assert not (tmp_path / "typo.jsonl").exists()
    run = cli("blast", "--ledger", fixture18.ledger, "--receipts", tmp_path / "nope", "--fact", F1)
    assert (
        one_line(run.err) == f"error: {tmp_path / 'nope'}: No such file or directory\n"
        and run.code == 1
    )
    run = cli(
        "explain",
        "--receipts",
        fixture18.receipts,
        "--receipt",
        "00000000-0000-4000-8000-000000000000",
    )
    assert run.code == 1 and "No such file or directory" in one_line(run.err)
    run = cli("explain", "--receipts", fixture18.receipts, "--receipt", "../keys/gateway")
    assert run.code == 1 and "No such file or directory" in one_line(run.err)
    run = cli("explain", "--verify", fixture18.gateway_pub, "--key", fixture18.pack_pub)
    assert run.code == 1 and "not JSON" in one_line(run.err)
    run = cli("eval", "--verify", tmp_path / "missing.json", "--key", fixture18.pack_pub)
    assert run.code == 1 and "No such file or directory" in one_line(run.err)
    run = cli("explain", "--verify", fixture18.receipts / f"{F1}.json", "--key", fixture18.ledger)
    assert run.code == 1 and "not a PEM public key" in one_line(run.err)
    out = tmp_path / "p.json"
    run = cli("pack", *where, "--fact", F1, "--out", out, "--sign", fixture18.gateway_pub)
    assert run.code == 1 and "private key" in one_line(run.err) and not out.exists()
    run = cli("pack", *where, "--fact", "nope", "--out", out, "--sign", fixture18.pack_key)
    assert (
        one_line(run.err) == "error: --fact nope: not in this ledger; no pack written\n"
        and not out.exists()
    )
    run = cli("eval", "--scenarios", fixture18.receipts / "missing.json")
    assert run.code == 1 and "No such file or directory" in one_line(run.err)
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": "0.1", "scenarios": [{"name": "m", "ops": [{"op": "fly"}]}]}')
    run = cli("eval", "--scenarios", bad)
    assert run.code == 1 and run.out == "" and "scenarios.0.ops.0.op" in one_line(run.err)
    assert state() == before


def test_out_files_are_never_replaced_without_force(
    cli: Cli, fixture18: worked.Worked, tmp_path: Path
) -> None:
    where = ["--ledger", fixture18.ledger, "--receipts", fixture18.receipts]
    out = tmp_path / "pack.json"
    out.write_text("keep me")
    for argv in (
        ["pack", *where, "--fact", F1, "--out", out, "--sign", fixture18.pack_key],
        [
            "explain",
            "--receipts",
            fixture18.receipts,
            "--receipt",
            R3,
            "--out",
            out,
            "--sign",
            fixture18.pack_key,
        ],
        ["eval", "--sign", fixture18.pack_key, "--out", out],
    ):
        run = cli(*argv)
        assert (
            run.code == 1 and run.out == "" and "already exists; pass --force" in one_line(run.err)
        )
        assert out.read_text() == "keep me"
    run = cli("pack", *where, "--fact", F1, "--out", out, "--sign", fixture18.pack_key, "--force")
    assert (
        run.code == 0
        and json.loads(out.read_text())["payloadType"] == "application/vnd.in-toto+json"
    )
    run = cli("review", "--receipts", fixture18.receipts, "--out", out)
    assert run.code == 1 and "is a file" in one_line(run.err)
    run = cli("review", "--receipts", fixture18.receipts, "--out", tmp_path / "a" / "b")
    assert run.code == 1 and "does not exist" in one_line(run.err) and not (tmp_path / "a").exists()


def test_blast_skips_what_is_not_a_receipt(cli: Cli, fixture18: worked.Worked) -> None:
    """SPEC-EXTRAS 9.1: authorization bundles and files that do not parse are skipped."""
    (fixture18.receipts / "notes.json").write_text("{}")
    (fixture18.receipts / "broken.json").write_text("{not json")
    (fixture18.receipts / f"{R3}.authorization.json").write_text(
        (fixture18.receipts / f"{R3}.json").read_text()
    )
    run = cli(
        "blast",
        "--ledger",
        fixture18.ledger,
        "--receipts",
        fixture18.receipts,
        "--fact",
        F1,
        "--json",
    )
    data = json.loads(run.out)
    assert run.code == 0 and [r["status"] for r in data["receipts"]] == ["executed"]


def supersede_f2(ledger: Path) -> str:
    """A derived fact F3 supersedes F2 (both derived from F1 by R3): retracting F3 would make F2
    current again."""
    f3 = "f3f3f3f3-0000-4000-8000-000000000003"
    with Ledger(ledger) as opened:
        opened.assert_fact(
            fact_id=f3,
            subject="acct:42",
            predicate="discount",
            value=25,
            space="org",
            actor="support-agent",
            provenance="attested",
            receipt_id=R3,
            supersedes=F2,
        )
    return f3


def test_blast_retract_dry_run_then_apply(
    cli: Cli, fixture18: worked.Worked, snapshot: Snapshot
) -> None:
    f3 = supersede_f2(fixture18.ledger)
    where = [
        "blast",
        "--ledger",
        fixture18.ledger,
        "--receipts",
        fixture18.receipts,
        "--fact",
        F1,
        "--retract",
    ]
    before = snapshot(fixture18.root)
    run = cli(*where)
    assert run.code == 0 and snapshot(fixture18.root) == before
    plan = run.out.split("\n\n")[1]
    assert plan.splitlines() == [
        "would retract 1 belief(s) (dry run; pass --apply to retract them, and any derived belief a retraction makes current again):",
        "  acct:42 discount = 25  fact f3f3f3f3",
    ]
    run = cli(*where, "--apply")
    assert (
        run.code == 1
        and "needs --reason" in one_line(run.err)
        and snapshot(fixture18.root) == before
    )
    run = cli(
        *where,
        "--apply",
        "--reason",
        "derived from a wrong plan",
        "--receipt-id",
        "r-ops-1",
        "--json",
    )
    assert run.code == 0, run.err
    data = json.loads(run.out)
    assert run.out == pretty(data) + "\n"
    done = data["retract"]
    assert (
        done["applied"]
        and done["reason"] == "derived from a wrong plan"
        and done["receiptId"] == "r-ops-1"
    )
    assert [(f["factId"], f["uncovered"]) for f in done["facts"]] == [(f3, False), (F2, True)]
    with Ledger(fixture18.ledger) as opened:
        assert {f.fact_id for f in opened.as_of()} == {F1}
        retractions = [e for e in opened.export() if e.kind == "retract"]
    assert {(e.fact_id, e.actor, e.reason, e.source.receipt_id) for e in retractions} == {
        (f3, "agent-custody-memory", "derived from a wrong plan", "r-ops-1"),
        (F2, "agent-custody-memory", "derived from a wrong plan", "r-ops-1"),
    }
    run = cli(*where, "--apply", "--reason", "again")
    assert run.code == 0 and run.out.endswith(
        "\n\nnothing retracted: no belief derived from this fact is still believed\n"
    )


class Recall:
    """A write-through store that keeps its records in a dict and can say they are gone."""

    def __init__(self, name: str, records: dict[str, str]) -> None:
        self.name = name
        self.records = records

    async def put(self, fact: Fact) -> str:
        self.records[f"rec-{fact.fact_id[:8]}"] = fact.fact_id
        return f"rec-{fact.fact_id[:8]}"

    async def remove(self, external_id: str, fact: Fact) -> None:
        self.records.pop(external_id, None)

    async def verify_removed(self, external_id: str, fact: Fact) -> bool:
        return external_id not in self.records


def test_blast_retract_cleans_the_configured_stores(
    cli: Cli, tmp_path: Path, isolated_plugins: Any
) -> None:
    """With --config the retractions go through the custody flows: each value leaves the store
    and is checked gone."""
    from pydantic import BaseModel

    from agent_custody_state.plugin import hookimpl

    records: dict[str, str] = {}

    class Settings(BaseModel):
        pass

    class Plugin:
        @hookimpl
        def register_stores(self, register: Callable[..., None]) -> None:
            register("recall", lambda settings, *, name: Recall(name, records), settings=Settings)

    isolated_plugins.register_plugin(Plugin(), name="recall-store")
    (tmp_path / "w").mkdir()
    built = worked.build(tmp_path / "w")
    # The store holds F2 as a configured server would have written it.
    ledger = tmp_path / "stored.jsonl"
    stored = {**worked.F2_WIRE, "external": {"recall": "rec-f2f2f2f2"}}
    with Ledger(ledger) as opened:
        opened.import_events(
            [
                AssertEvent(worked.E1, worked.F1_WIRE["validFrom"], Fact.from_dict(worked.F1_WIRE)),
                AssertEvent(worked.E2, stored["validFrom"], Fact.from_dict(stored)),
            ]
        )
    records["rec-f2f2f2f2"] = F2
    config = tmp_path / "memory.toml"
    config.write_text('[[stores]]\nname = "recall"\ntype = "recall"\n')
    argv = ["blast", "--ledger", ledger, "--receipts", built.receipts, "--fact", F1, "--retract"]
    run = cli(*argv, "--config", config)
    assert run.code == 1 and "--config names the stores" in one_line(run.err)
    run = cli(*argv, "--apply", "--reason", "bad plan", "--config", config)
    assert run.code == 0, run.err
    report = run.out.split("\n\n")[1].splitlines()
    assert report[0] == "retracted 1 belief(s) as agent-custody-memory (bad plan):"
    assert report[1].startswith("  acct:42 discount = 20  fact f2f2f2f2  event ")
    assert report[2] == "    stores: recall=verified"
    assert records == {}


def test_help_imports_none_of_the_extras() -> None:
    """``--help`` stays fast: building the parser imports no extras module (each command imports
    its own when it runs)."""
    import subprocess
    import sys

    probe = (
        "import sys; from agent_custody_state.cli import build_parser; build_parser(); "
        "print(sorted(m for m in sys.modules if m.startswith(('agent_custody_state.extras', "
        "'agent_custody_state.signing', 'cryptography', 'http.server'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_port_out_of_range_is_a_usage_error(cli: Cli, tmp_path: Path, snapshot: Snapshot) -> None:
    """An integer that is no port is a flag value of the wrong form: exit 2 (SPEC 5), one
    line naming the flag, nothing created."""
    before = snapshot(tmp_path)
    run = cli("review", "--receipts", tmp_path, "--port", "70000")
    assert (run.code, run.out) == (2, "")
    assert run.err == "error: --port 70000: a port is 0 to 65535\n"
    assert snapshot(tmp_path) == before
