"""Write the upgrade fixtures with an earlier version's code (run once per commit; kept as made).

For each commit in ``COMMITS``, from the repository root (never a checkout: an export)::

    mkdir -p /tmp/upg/C && git archive C | tar -x -C /tmp/upg/C
    PYTHONPATH=/tmp/upg/C/core/src:/tmp/upg/C/sql/src:/tmp/upg/C/plugins/events-sqlite/src \\
        .venv/bin/python core/tests/data/upgrade/make.py C core/tests/data/upgrade/C
    # the same with a third argument ``sqlite`` and the folder C-sqlite for SQLite ledgers

Each run writes, with that commit's code, a ledger per forget mode the version had
(``plain.jsonl``, ``crypto-shred.jsonl``; ``.sqlite`` with ``sqlite``) holding two asserts (the
second superseding the first), a hold, a retract, a forget with its signed certificate
(``<mode>.cert.json``, from versions with certificates), a signed checkpoint (key pair
``key.pub`` kept, its private half deleted), one assert after it, and, from versions with an outbox, a forget whose
store removal (store ``mem``, external id ``m-4``) the process never made. In crypto-shred mode
it also writes ``elsewhere.jsonl`` (or ``.sqlite``): one fact sealed with a key store away from
the ledger (``vault/elsewhere.keys``), the setup docs/forget.md advises. ``made.json`` (or
``made-sqlite.json``) records the commit and the ids.

The files are written in a temporary folder and copied here, so the paths an old version
records (a mode mark's key store) name nothing on any machine: as for a ledger folder restored
elsewhere. Two changes after writing: the empty ``.lock`` files are left out, and an outbox
entry's writer pid becomes 4194305 (above Linux's largest ``pid_max``), so the entry reads as
left by a dead process wherever the tests run (the outbox tells a live writer by its pid).
"""

from __future__ import annotations

import datetime as dt
import inspect
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state.ledger.ledger import Ledger

COMMITS = {
    "1ce3520": "2026-12-02 10:03, the first SQL backends: no chain, no forget modes",
    "af8a474": "2026-12-03 06:48: chain, checkpoints, crypto-shred (random key ids, no mode "
    "mark), certificates",
    "7a3a882": "2026-12-06 08:14: time-ordered key ids, the mode mark (a key store elsewhere only)",
    "29a8e2e": "2026-12-07 02:41: the mark for every crypto-shred ledger, sidecars named after "
    "the file itself, the outbox",
}

FORGET_KEY = "upgrade-forget-key"
DEAD_PID = 4194305
COMMON = {"space": "s", "actor": "agent", "provenance": "attested"}


def clock_from(start: dt.datetime) -> Any:
    state = {"n": 0}

    def clock() -> dt.datetime:
        state["n"] += 1
        return start + dt.timedelta(seconds=state["n"])

    return clock


def keys(out: Path) -> Path:
    pem = out / "key.pem"
    if not pem.exists():
        key = Ed25519PrivateKey.generate()
        private = serialization.PrivateFormat.PKCS8
        pem.write_bytes(
            key.private_bytes(serialization.Encoding.PEM, private, serialization.NoEncryption())
        )
        public = serialization.PublicFormat.SubjectPublicKeyInfo
        (out / "key.pub").write_bytes(
            key.public_key().public_bytes(serialization.Encoding.PEM, public)
        )
    return pem


def story(led: Ledger) -> dict[str, str]:
    """Asserts, a supersession, a hold, a retract and a forget: every event kind but confirm."""
    first = led.assert_fact(subject="user:1", predicate="likes", value={"tea": "green"}, **COMMON)
    second = led.assert_fact(
        subject="user:1",
        predicate="likes",
        value={"tea": "black"},
        supersedes=first.fact.fact_id,
        **COMMON,
    )
    held = led.assert_fact(subject="user:2", predicate="name", value="Ada", **COMMON)
    led.hold(fact_id=held.fact.fact_id, actor="legal", reason="case 7")
    gone = led.assert_fact(subject="user:3", predicate="email", value="a@example.org", **COMMON)
    led.retract(fact_id=second.fact.fact_id, actor="agent", reason="wrong")
    return {
        "first": first.fact.fact_id,
        "second": second.fact.fact_id,
        "held": held.fact.fact_id,
        "forgotten": gone.fact.fact_id,
    }


def write(out: Path, mode: str, suffix: str, own_checkpoints: bool) -> dict[str, Any]:
    """One ledger in ``mode`` at ``out/<mode><suffix>``, with everything the version wrote."""
    pem = keys(out)
    path = out / f"{mode}{suffix}"
    made: dict[str, Any] = {"ledger": path.name, "outbox": None, "certificate": None}
    opts: dict[str, Any] = {"forget_mode": mode, "checkpoint_key": str(pem)}
    if mode != "plain" and not own_checkpoints:
        # before 7dac489 a crypto-shred ledger kept no checkpoints of its own: they were named
        # (here as the later default beside a file)
        opts["checkpoints"] = f"{path}.checkpoints"
    clock = clock_from(dt.datetime(2026, 11, 1, tzinfo=dt.UTC))
    with Ledger(str(path), FORGET_KEY, clock, **opts) as led:
        made.update(story(led))
        gone = made["forgotten"]
        if "certificate" in inspect.signature(led.forget).parameters:
            done = led.forget(fact_id=gone, actor="dpo", reason="erasure", certificate=True)
            made["certificate"] = f"{mode}.cert.json"
            (out / made["certificate"]).write_text(json.dumps(done.certificate, indent=2) + "\n")
        else:
            led.forget(fact_id=gone, actor="dpo", reason="erasure")
        checkpoint = led.checkpoint()
        made["checkpoint_size"] = checkpoint.size
        later = led.assert_fact(
            subject="user:4", predicate="city", value="Oslo", external={"mem": "m-4"}, **COMMON
        )
        made["later"] = later.fact.fact_id
        try:
            from agent_custody_state.stores.outbox import Outbox, outbox_path
        except ImportError:
            pass
        else:  # a forget whose store removal the process never made (it died)
            box = Outbox(outbox_path(str(path), None))
            box.owe([later.fact], "forget", led.now())
            led.forget(fact_id=later.fact.fact_id, actor="dpo", reason="erasure")
            made["outbox"] = box.path.name
    if mode != "plain":
        made["elsewhere"] = elsewhere(out, suffix)
    return made


def elsewhere(out: Path, suffix: str) -> dict[str, str]:
    """A crypto-shred ledger whose key store is not beside it."""
    (out / "vault").mkdir(exist_ok=True)
    path, store = out / f"elsewhere{suffix}", out / "vault" / "elsewhere.keys"
    with Ledger(str(path), FORGET_KEY, forget_mode="crypto-shred", key_store=str(store)) as led:
        fact = led.assert_fact(subject="user:5", predicate="pin", value="4711", **COMMON)
    return {"ledger": path.name, "key_store": "vault/elsewhere.keys", "fact": fact.fact.fact_id}


def write_unchained(out: Path, suffix: str) -> dict[str, Any]:
    """The first versions' ledger: no chain, forget modes, checkpoints or certificates."""
    path = out / f"plain{suffix}"
    clock = clock_from(dt.datetime(2026, 11, 1, tzinfo=dt.UTC))
    with Ledger(str(path), FORGET_KEY, clock) as led:
        made: dict[str, Any] = {"ledger": path.name, "outbox": None, "certificate": None}
        made.update(story(led))
        led.forget(fact_id=made["forgotten"], actor="dpo", reason="erasure")
    return made


def settle(out: Path) -> None:
    """Leave out the lock files and the private key (only ``key.pub`` is kept: no private key
    in the repository); give outbox entries a pid no process can have."""
    for lock in out.rglob("*.lock"):
        lock.unlink()
    (out / "key.pem").unlink(missing_ok=True)
    for box in out.glob("*.outbox"):
        box.write_text(re.sub(r'"pid":\s*\d+', f'"pid":{DEAD_PID}', box.read_text()))


def main(argv: list[str]) -> None:
    commit, target = argv[1], Path(argv[2])
    sqlite = argv[3:] == ["sqlite"]
    suffix = ".sqlite" if sqlite else ".jsonl"
    chained = "checkpoint_key" in inspect.signature(Ledger.__init__).parameters
    try:
        from agent_custody_state.ledger.shred import ShreddingBackend
    except ImportError:
        own_checkpoints = True
    else:
        own_checkpoints = "checkpoint_log" in vars(ShreddingBackend)
    made: dict[str, Any] = {"commit": commit, "what": COMMITS.get(commit, "")}
    made["forget_key"] = FORGET_KEY
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "made"
        out.mkdir()
        if chained:
            made["ledgers"] = {
                mode: write(out, mode, suffix, own_checkpoints)
                for mode in ("plain", "crypto-shred")
            }
        else:
            made["ledgers"] = {"plain": write_unchained(out, suffix)}
        name = "made-sqlite.json" if sqlite else "made.json"
        (out / name).write_text(json.dumps(made, indent=2) + "\n")
        settle(out)
        shutil.copytree(out, target, dirs_exist_ok=True)


if __name__ == "__main__":
    main(sys.argv)
