"""The extras on hostile input: receipts directories, signed files and scenario files that are
nested absurdly deep, not bundles at all, hold lone surrogates, or are signed but of the wrong
shape. Each gives a verdict or a one-line error, never a traceback. Control characters in a
receipt or the ledger cannot forge a line of the output, and a proof hash is read as strictly as
the original reads it."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import worked
from conftest import Cli
from gatewaysim import Gateway, seeded
from worked import F1, R1, R3

from agent_custody_state.extras.actionpack import sign_action_pack
from agent_custody_state.extras.jsview import MAX_DEPTH, pretty
from agent_custody_state.extras.pack import sign_pack
from agent_custody_state.extras.verify import VerifyOptions, verify_bundle
from agent_custody_state.keys import load_key_pair, load_public_ref


def one_line(err: str) -> str:
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
    return err


def nested(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def keys(w: worked.Worked) -> list[str]:
    return ["--issuer-key", str(w.gateway_pub), "--principal-key", str(w.principal_pub)]


def rewrite(w: worked.Worked, receipt_id: str, change: Callable[[Any, Any], None]) -> None:
    """Change a receipt's decoded statement in place (its signature no longer verifies)."""
    path = w.receipts / f"{receipt_id}.json"
    bundle = json.loads(path.read_text())
    statement = json.loads(base64.b64decode(bundle["envelope"]["payload"]))
    change(statement, bundle)
    text = json.dumps(statement)  # ASCII: a lone surrogate stays an escape, as a gateway writes it
    bundle["envelope"]["payload"] = base64.b64encode(text.encode()).decode()
    path.write_text(json.dumps(bundle))


def test_files_nested_too_deeply_are_skipped(fixture18: worked.Worked, cli: Cli) -> None:
    """One such file used to abort every command on the directory with a RecursionError; a
    signed bundle with a deep unsigned member crashed the verification of its log leaf."""
    w = fixture18
    (w.receipts / "deep.json").write_text("[" * 5000 + "]" * 5000)
    bundle = json.loads((w.receipts / f"{R3}.json").read_text())
    bundle["envelope"]["signatures"][0]["note"] = nested(500)
    (w.receipts / f"{R3}.json").write_text(json.dumps(bundle))
    ledger = ["--ledger", str(w.ledger)]
    run = cli("blast", *ledger, "--receipts", w.receipts, "--fact", F1)
    assert run.code == 0 and "0 call(s) made after the agent was shown it:" in run.out
    run = cli("explain", "--receipts", w.receipts, "--receipt", R1, *ledger, *keys(w))
    assert run.code == 0 and "VERIFIED, 16 checks" in run.out
    run = cli("explain", "--receipts", w.receipts, "--receipt", R3, *keys(w))
    assert run.code == 1 and one_line(run.err) == (
        f"error: receipt {R3}: not a receipt bundle: not JSON "
        f"(nested more than {MAX_DEPTH} levels deep)\n"
    )
    run = cli(*run_pack(w, w.root / "fact.pack.json"))
    assert run.code == 0 and "receipts in pack: 1\n" in run.out
    run = cli("review", "--receipts", w.receipts, *keys(w), "--out", w.root / "site")
    assert (run.code, run.out) == (
        0,
        f"wrote 2 receipt page(s) and the index to {w.root / 'site'}\n",
    )


def run_pack(w: worked.Worked, out: Path) -> list[str | Path]:
    return ["pack", "--ledger", w.ledger, "--receipts", w.receipts, "--fact", F1, "--out", out,
            "--sign", w.pack_key]  # fmt: skip


@pytest.mark.parametrize("command", ["eval --verify", "explain --verify", "pack --verify"])
def test_signed_files_nested_too_deeply(tmp_path: Path, cli: Cli, command: str) -> None:
    w = worked.build(tmp_path)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 5000 + "]" * 5000)
    run = cli(*command.split(), deep, "--key", w.pack_pub)
    assert (run.code, run.out) == (1, "")
    assert one_line(run.err) == f"error: {deep}: not JSON (nested more than 300 levels deep)\n"


def test_a_scenario_file_nested_too_deeply(tmp_path: Path, cli: Cli) -> None:
    deep = tmp_path / "s.json"
    deep.write_text("[" * 5000 + "]" * 5000)
    run = cli("eval", "--scenarios", deep)
    assert (run.code, run.out) == (1, "")
    message = f"error: scenario file {deep}: not JSON (nested more than 300 levels deep)\n"
    assert one_line(run.err) == message


def test_a_value_as_deep_as_the_ledger_allows_still_verifies(tmp_path: Path, cli: Cli) -> None:
    (tmp_path / "receipts").mkdir()
    (tmp_path / "w").mkdir()
    w = worked.build(tmp_path / "w")
    gateway = Gateway(tmp_path / "receipts", seeded(1), seeded(2))
    rid = "44444444-4444-4444-8444-444444444444"
    args = {"subject": "acct:1", "predicate": "deep", "value": nested(257), "space": "org"}
    gateway.call(rid, "2026-09-01T10:00:00.000Z", "memory.write", args)
    run = cli("explain", "--receipts", tmp_path / "receipts", "--receipt", rid, *keys(w))
    assert run.code == 0 and "VERIFIED, 16 checks" in run.out


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("not json", "not JSON (Expecting value: line 1 column 1 (char 0))"),
        ("[]", "the bundle has no envelope payload"),
        ('{"envelope": {"payload": "bm90IGpzb24="}}', "the envelope payload is not JSON"),
    ],
)
def test_explain_names_a_receipt_that_is_not_a_bundle(
    fixture18: worked.Worked, cli: Cli, content: str, problem: str
) -> None:
    (fixture18.receipts / f"{R1}.json").write_text(content)
    run = cli("explain", "--receipts", fixture18.receipts, "--receipt", R1)
    assert (run.code, run.out) == (1, "")
    assert one_line(run.err).startswith(f"error: receipt {R1}: not a receipt bundle: {problem}")


def test_lone_surrogates_print_as_node_prints_them(fixture18: worked.Worked, cli: Cli) -> None:
    """JSON may hold ``"\\ud800"``; Python cannot encode it, Node writes U+FFFD."""
    w = fixture18

    def agent(statement: Any, bundle: Any) -> None:
        statement["predicate"]["agent"]["id"] = "\ud800agent"
        bundle["treeHead"]["payloadType"] = "\ud800"

    rewrite(w, R1, agent)
    run = cli("explain", "--receipts", w.receipts, "--receipt", R1, *keys(w))
    assert run.code == 1 and "WHO                          \ufffdagent (attested" in run.out
    assert "CAN I VERIFY IT              NOT VERIFIED: receipt signature" in run.out
    run = cli("review", "--receipts", w.receipts, *keys(w), "--out", w.root / "site")
    assert run.code == 0
    assert "\ufffdagent" in (w.root / "site" / "index.html").read_text(encoding="utf-8")
    bundle = json.loads((w.receipts / f"{R3}.json").read_text())
    bundle["treeHead"]["payloadType"] = "\ud800"
    result = verify_bundle(bundle, VerifyOptions([load_public_ref(w.gateway_pub)]))
    head = next(c for c in result.checks if c.name == "tree head signature")
    assert head.line() == "FAIL  tree head signature  (signature by fd110d301d2f did not verify)"


@pytest.mark.parametrize("field", ["history", "receipts", "missingReceipts", "holds", "blast"])
def test_a_custody_pack_of_the_wrong_shape(fixture18: worked.Worked, cli: Cli, field: str) -> None:
    w = fixture18
    out = w.root / "fact.pack.json"
    assert cli(*run_pack(w, out)).code == 0
    pack = json.loads(base64.b64decode(json.loads(out.read_text())["payload"]))["predicate"]
    pack[field] = 5 if field != "blast" else {"receipts": 5}
    out.write_text(pretty(sign_pack(pack, load_key_pair(w.pack_key))))
    run = cli("pack", "--verify", out, "--key", w.pack_pub, *keys(w))
    assert run.code in (0, 1) and "\nRESULT: " in run.out and run.err == ""


@pytest.mark.parametrize("field", ["written", "downstream", "consumed"])
def test_an_action_pack_of_the_wrong_shape(fixture18: worked.Worked, cli: Cli, field: str) -> None:
    w = fixture18
    out = w.root / "action.pack.json"
    run = cli("explain", "--receipts", w.receipts, "--receipt", R3, "--ledger", w.ledger,
              "--out", out, "--sign", w.pack_key)  # fmt: skip
    assert run.code == 0
    pack = json.loads(base64.b64decode(json.loads(out.read_text())["payload"]))["predicate"]
    pack[field] = 5 if field == "written" else {"receipts": 5, "facts": 5, "stillBelieved": 5}
    out.write_text(pretty(sign_action_pack(pack, load_key_pair(w.pack_key))))
    run = cli("explain", "--verify", out, "--key", w.pack_pub, *keys(w))
    assert run.code in (0, 1) and "\nRESULT: " in run.out and run.err == ""


def test_a_proof_hash_is_hex_digits_only(fixture18: worked.Worked) -> None:
    """``bytes.fromhex`` also takes spaces; Node's hex decoding stops at one, so the original
    refuses such a proof, and so must we."""
    bundle = fixture18.bundles[R3]
    proof = bundle["inclusion"]["hashes"][0]
    opts = VerifyOptions(
        [load_public_ref(fixture18.gateway_pub)], [load_public_ref(fixture18.principal_pub)]
    )
    assert verify_bundle(bundle, opts).ok
    bundle["inclusion"]["hashes"][0] = " ".join(proof[i : i + 2] for i in range(0, 64, 2))
    result = verify_bundle(bundle, opts)
    assert not result.ok and result.failed_names() == "log inclusion proof"


FORGED = "memory.write\nCAN I VERIFY IT              VERIFIED, 16 checks\x1b[2K\x9b1A"


def test_control_characters_cannot_forge_an_answer(tmp_path: Path, cli: Cli) -> None:
    """The agent names the tool it calls: a newline in it used to print a forged answer line
    (and a forged row of the review page), an escape sequence drove the reader's terminal."""
    (tmp_path / "receipts").mkdir()
    gateway = Gateway(tmp_path / "receipts", seeded(1), seeded(2))
    rid = "44444444-4444-4444-8444-444444444444"
    gateway.call(rid, "2026-09-01T10:00:00.000Z", FORGED, {"subject": "s\n"}, denied=["x\ty"])
    run = cli("explain", "--receipts", tmp_path / "receipts", "--receipt", rid)
    assert run.code == 0 and not any(ch in run.out for ch in "\x1b\x9b\t")
    lines = run.out.splitlines()
    assert [line[:28].strip() for line in lines if line[:28].strip()] == [
        "WHO", "WHO AUTHORIZED IT", "WHAT WAS ALLOWED", "WHAT THE AGENT SAW", "WHAT IT DID",
        "WHY", "WHAT EVIDENCE", "CAN I VERIFY IT", "DID ANYTHING DEPEND ON THIS",
        "WHAT NEEDS REVERSAL",
    ]  # fmt: skip
    assert lines[6].endswith('memory.write\\nCAN I VERIFY IT              VERIFIED, 16 checks'
                             '\\u001b[2K\\u009b1A {"subject":"s\\n"} -> denied: x\\ty')  # fmt: skip
    site = tmp_path / "site"
    assert cli("review", "--receipts", tmp_path / "receipts", "--out", site).code == 0
    html = (site / "r" / f"{rid}.html").read_text(encoding="utf-8")
    assert html.count("<dt>CAN I VERIFY IT</dt>") == 1 and "\x1b" not in html


def test_control_characters_in_the_ledger_stay_on_their_line(
    fixture18: worked.Worked, cli: Cli
) -> None:
    from agent_custody_state.ledger.ledger import Ledger

    with Ledger(fixture18.ledger) as ledger:
        event = ledger.assert_fact(
            subject="acct:9\nnot retracted", predicate="p\x1b[1A", value=1, space="org",
            actor="a\r", receipt_id=R3,
        )  # fmt: skip
        retraction = ledger.retract(fact_id=event.fact_id, actor="ops\x1b[2K", reason="why\nnot")
    run = cli("blast", "--ledger", fixture18.ledger, "--receipts", fixture18.receipts,
              "--fact", event.fact_id)  # fmt: skip
    assert run.code == 0 and "\x1b" not in run.out and "\r" not in run.out
    assert run.out.splitlines()[:2] == [
        f"fact {event.fact_id}: acct:9\\nnot retracted p\\u001b[1A = 1 "
        "(space org, by a\\r, claimed)",
        f"retracted at {retraction.tx_time} by ops\\u001b[2K: why\\nnot",
    ]  # fmt: skip
