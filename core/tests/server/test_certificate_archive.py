"""The certificate archive (``stores.archive``, docs/proofs.md "Certificates kept by the server").

A certificate handed back only in an answer was lost with the answer: a forget whose caller was
cancelled ran to its end (``finish``) but its certificate went nowhere, and the value being gone,
it could never be issued again; a sweep interrupted part-way lost every certificate (they were
written after the whole sweep). With ``certificates = DIR`` every forget and sweep keeps one per
fact in ``DIR/<factId>.json`` before answering, asked for or not; each verifies with the
command line against the ledger.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from servertest import run_cli, write

from agent_custody_state import Ledger
from agent_custody_state.stores.archive import CertificateArchive, file_name
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore
from agent_custody_state_conformance.gateway import GatewayClient

pytestmark = pytest.mark.anyio

SECRET = "erin.archive+secret@example.org"


def verified(path: Path, public: Path, ledger: Path) -> str:
    done = run_cli(
        "certificate", "verify", str(path), "--key", str(public), "--ledger", str(ledger)
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout


def assert_one(ledger: Ledger, value: str, space: str = "org") -> str:
    return ledger.assert_fact(
        subject="s", predicate="p", value=value, space=space, actor="a"
    ).fact.fact_id


class SlowRemoval(InProcessStore):
    """An in-process store whose removals wait until the test lets them go."""

    def __init__(self) -> None:
        super().__init__("slow")
        self.started = asyncio.Event()
        self.go = asyncio.Event()

    async def remove(self, external_id: str, fact: Any) -> None:
        self.started.set()
        await self.go.wait()
        await super().remove(external_id, fact)


async def test_a_cancelled_forget_keeps_its_certificate(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    path, folder = tmp_path / "l.jsonl", tmp_path / "certs"
    store = SlowRemoval()
    with Ledger(path) as ledger:
        custody = Custody(ledger, [store], certificate_key=keys[0], certificates=folder)
        CertificateArchive(folder).prepare()
        fact = (await custody.write(_request(SECRET))).event.fact.fact_id
        call = asyncio.ensure_future(
            custody.forget(fact_id=fact, actor="a", reason="erasure", certificate=True)
        )
        await store.started.wait()  # the ledger has forgotten; the store is removing
        call.cancel()
        store.go.set()
        with pytest.raises(asyncio.CancelledError):
            await call  # the caller is cancelled; its flow ran to its end first (``finish``)
    kept = folder / f"{fact}.json"
    assert kept.exists(), sorted(folder.iterdir())
    assert f"fact {fact} erased (Clear), outcome complete" in verified(kept, keys[1], path)
    assert SECRET not in kept.read_text()
    assert [p.name for p in folder.iterdir()] == [kept.name]  # no temporary left


def _request(value: str) -> Any:
    from agent_custody_state.ledger.requests import AssertRequest

    return AssertRequest(subject="s", predicate="p", value=value, space="org", actor="a")


async def test_every_forget_and_sweep_is_kept_asked_for_or_not(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    path, folder = tmp_path / "l.jsonl", tmp_path / "certs"
    folder.mkdir()
    with Ledger(path) as ledger:
        custody = Custody(ledger, certificate_key=keys[0], certificates=folder)
        one = assert_one(ledger, SECRET)
        swept = {assert_one(ledger, f"{SECRET}-{n}", space="old") for n in range(3)}
        done = await custody.forget(fact_id=one, actor="a", reason="erasure")
        assert done.certificate is not None  # issued, though not asked for
        report = await custody.sweep(
            actor="a", reason="retention", space="old", before=ledger.present()
        )
        assert {s.event.fact_id for s in report.forgotten} == swept
    assert {p.name for p in folder.iterdir()} == {f"{f}.json" for f in {one, *swept}}
    for fact in {one, *swept}:
        kept = folder / f"{fact}.json"
        assert f"fact {fact} erased" in verified(kept, keys[1], path)


def test_odd_fact_ids_get_safe_names_and_a_second_certificate_its_own_file(
    tmp_path: Path,
) -> None:
    assert file_name("f_01J9Z8K2QX") == "f_01J9Z8K2QX"
    for odd in ("../../etc/passwd", ".hidden", "a/b", "x" * 300, "tab\there", ""):
        name = file_name(odd)
        assert name.startswith("id-") and len(name) == 67 and "/" not in name, odd
    archive = CertificateArchive(tmp_path / "certs")
    archive.prepare()
    first = archive.keep("../escape", {"n": 1})
    second = archive.keep("../escape", {"n": 2})
    assert first.parent == second.parent == tmp_path / "certs"
    assert second.name == first.name.replace(".json", ".2.json")
    assert [json.loads(p.read_text())["n"] for p in (first, second)] == [1, 2]
    assert not (tmp_path / "escape.json").exists()


def test_a_folder_that_cannot_be_made_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        CertificateArchive(tmp_path / "missing" / "certs").prepare()
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="not a folder|File exists"):
        CertificateArchive(tmp_path / "file").prepare()


async def test_the_server_keeps_certificates_it_was_not_asked_for(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    ledger, folder = tmp_path / "ledger.jsonl", tmp_path / "certs"
    async with GatewayClient.stdio(
        "serve", "--ledger", str(ledger), "--key", str(keys[0]), "--certificates", str(folder)
    ) as gw:
        fact = (await write(gw, value=SECRET))["fact"]["factId"]
        result = await gw.call("memory.forget", {"factId": fact, "reason": "erasure"})
        assert not result.is_error, result.texts
        assert len(result.texts) == 1  # the answer is the original's: no certificate asked
        assert "certificate" not in (result.raw.structured_content or {})
    kept = folder / f"{fact}.json"
    assert f"fact {fact} erased (Clear), outcome complete" in verified(kept, keys[1], ledger)


def test_certificates_without_a_key_stop_the_start(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    done = run_cli("serve", "--ledger", str(ledger), "--certificates", str(tmp_path / "c"))
    assert done.returncode != 0
    assert "certificates needs key" in done.stderr, done.stderr
    assert not ledger.exists() and not (tmp_path / "c").exists()
