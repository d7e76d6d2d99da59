"""What the nineteenth review left (its "Left" bullets), done.

A ``forget``/``sweep`` with ``--key-store`` on a plain ledger recorded crypto-shred mode (and
made a key store) even when the forget was then refused; ``sweep(progress=5)`` failed with
Python's own ``TypeError`` from inside the loop; a ``KeyboardInterrupt`` or ``SystemExit`` in a
sweep did not carry what it had forgotten (``sweep_result``); ``review`` on a port in use said
only "Address already in use".
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.stopped import stopped_result
from agent_custody_state.stores.flows import Custody

FAR = "2999-01-01T00:00:00Z"


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _plain(folder: Path, name: str, *, hold: bool = False) -> tuple[Path, str]:
    """A plain ledger ``folder/name`` with one fact (on hold when ``hold``), and its id."""
    path = folder / name
    with Ledger(str(path)) as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value="v", space="org", actor="a")
        if hold:
            ledger.hold(fact_id=fact.fact_id, actor="a", reason="audit")
    return path, fact.fact_id


def _forget_argv(command: str, path: Path, fact_id: str) -> list[str]:
    if command == "forget":
        return ["forget", "--ledger", str(path), "--fact", fact_id, "--reason", "r"]
    return ["sweep", "--ledger", str(path), "--before", FAR, "--reason", "r"]


@pytest.mark.parametrize("name", ["l.jsonl"])  # SQLite: the events-sqlite plugin's tests
@pytest.mark.parametrize(
    ("command", "case"),
    [("forget", "unknown"), ("forget", "held"), ("sweep", "held"), ("sweep", "done")],
)
@pytest.mark.parametrize("asked", ["new key store", "existing key store", "mode only"])
def test_a_forget_on_a_plain_ledger_never_records_crypto_shred_mode(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    command: str,
    case: str,
    asked: str,
) -> None:
    """The mark (``<ledger>.mode``, SQL's ``_settings`` table) and a new key store were written
    before the forget was refused: a refused call must change no byte of the ledger's files,
    and a forget, which writes no value, never changes the ledger's mode. A key store that
    exists is used without marking the ledger (one from before the mark, keys elsewhere)."""
    folder = tmp_path / "ledger"
    folder.mkdir()
    keys = folder / "k.keys"
    if asked == "existing key store":  # a real key store, made by another ledger
        with Ledger(str(tmp_path / "other.jsonl"), forget_mode="crypto-shred", key_store=str(keys)):
            pass
    path, fact_id = _plain(folder, name, hold=case == "held")
    flags = (
        ["--forget-mode", "crypto-shred"] if asked == "mode only" else ["--key-store", str(keys)]
    )
    before = _tree(folder)
    code = main([*_forget_argv(command, path, "nope" if case == "unknown" else fact_id), *flags])
    capsys.readouterr()
    runs = asked == "existing key store" and command == "sweep"  # held: "forgot 0 facts"
    assert code == (0 if runs else 1)
    if case == "done" and runs:
        assert _tree(folder) != before  # forgotten, with no mark recorded
        assert not (folder / f"{name}.mode").exists()
    else:
        assert _tree(folder) == before  # byte-identical: no mark, no key store, no event
    with Ledger(str(path)) as plain:  # still plain: a plain writer writes values
        plain.assert_fact(subject="t", predicate="p", value="w", space="org", actor="a")


@pytest.mark.parametrize("name", ["l.jsonl"])  # SQLite: the events-sqlite plugin's tests
@pytest.mark.parametrize("command", ["forget", "sweep"])
def test_a_crypto_shred_forget_still_destroys_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, command: str
) -> None:
    path = tmp_path / name
    keys = tmp_path / "k.keys"
    with Ledger(str(path), forget_mode="crypto-shred", key_store=str(keys)) as ledger:
        fact = ledger.assert_fact(subject="s", predicate="p", value="v", space="org", actor="a")
    assert main([*_forget_argv(command, path, fact.fact_id), "--key-store", str(keys)]) == 0
    capsys.readouterr()
    with Ledger(str(path), forget_mode="crypto-shred", key_store=str(keys)) as ledger:
        assert ledger.facts()[0].forgotten is not None
        assert ledger.backend.keystore().doomed() == {}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("argument", "value", "named"),
    [
        ("progress", 5, "progress must be None or a function"),
        ("progress", "bar", "progress must be None or a function"),
        ("certificates", "no", "certificates must be True, False or a CertificateOptions"),
        ("certificates", 1, "certificates must be True, False or a CertificateOptions"),
    ],
)
@pytest.mark.parametrize("caller", ["ledger", "custody"])
def test_a_sweep_names_a_wrong_callback_before_it_forgets(
    tmp_path: Path, argument: str, value: Any, named: str, caller: str
) -> None:
    """``progress=5`` was "'int' object is not callable" from the loop, and
    ``certificates="no"`` asked for certificates ("there is no key")."""
    path, _ = _plain(tmp_path, "l.jsonl")
    before = _tree(tmp_path)
    with Ledger(str(path)) as ledger:
        sweep: Callable[..., Any] = ledger.sweep
        if caller == "custody":
            custody = Custody(ledger)

            def sweep(**kwargs: Any) -> Any:
                return anyio.run(lambda: custody.sweep(**kwargs))

        with pytest.raises(LedgerError, match=named) as refused:
            sweep(before=FAR, actor="a", reason="r", **{argument: value})
        assert refused.value.field == argument
        assert ledger.facts()[0].forgotten is None
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("kind", [KeyboardInterrupt, SystemExit])
def test_an_interrupted_sweep_says_what_it_forgot(
    tmp_path: Path, kind: type[BaseException]
) -> None:
    """Ctrl-C in a long sweep (here: from its progress callback) raised a bare
    ``KeyboardInterrupt``: the caller could not learn which facts were already forgotten. The
    same exception is raised, carrying them and their certificates."""
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 0
    with Ledger(str(tmp_path / "l.jsonl"), checkpoint_key=str(tmp_path / "k")) as ledger:
        for number in range(4):
            ledger.assert_fact(
                subject=f"s{number}", predicate="p", value="v", space="org", actor="a"
            )
        raised = kind()

        def progress(done: int, total: int) -> None:
            if done == 2:
                raise raised

        with pytest.raises(kind) as stopped:
            ledger.sweep(before=FAR, actor="a", reason="r", progress=progress, certificates=True)
        assert stopped.value is raised
        result = stopped_result(stopped.value)
        assert result is not None
        gone = [fact.fact_id for fact in ledger.facts() if fact.forgotten is not None]
        assert len(gone) == 2
        assert sorted(event.fact_id for event in result.forgotten) == sorted(gone)
        assert sorted(result.certificates) == sorted(gone)


def test_an_interrupted_custody_sweep_keeps_its_intent(tmp_path: Path) -> None:
    """Through the custody flow the interrupt passes at once (no store is contacted after it),
    carrying what the ledger forgot; the intent stays in the archive, so the next start issues
    the certificates (``stores.intents``), as after a kill."""
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 0
    archive = tmp_path / "certs"
    archive.mkdir()
    with Ledger(str(tmp_path / "l.jsonl")) as ledger:
        for number in range(3):
            ledger.assert_fact(
                subject=f"s{number}", predicate="p", value="v", space="org", actor="a"
            )
        custody = Custody(ledger, certificate_key=str(tmp_path / "k"), certificates=archive)

        def progress(stage: str, done: int, total: int) -> None:
            if stage == "ledger" and done == 1:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt) as stopped:
            anyio.run(
                lambda: custody.sweep(
                    before=FAR, actor="a", reason="r", progress=progress, certificates=True
                )
            )
        result = stopped_result(stopped.value)
        assert result is not None and len(result.forgotten) == 1
        # Its full certificate is kept now (review 21); the intent stays for the rest.
        names = sorted(p.name for p in archive.iterdir())
        assert [n.startswith(".intent-") for n in names] == [True, False]
        assert names[1] == f"{result.forgotten[0].fact_id}.json"


def test_review_on_a_port_in_use_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    receipts = tmp_path / "receipts"
    receipts.mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["review", "--receipts", str(receipts), "--port", str(port)])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot listen on 127.0.0.1:{port}: the port is in use"), err
    assert "--port" in err and len(err.splitlines()) == 1
