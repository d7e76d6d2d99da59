"""Eighth review: signing keys, signed checkpoints and certificates (docs/decisions.md).

A key rotation verifies with the keys before and after it (``verify`` and ``certificate verify``
take several ``--key``), and a checkpoint signed by another key says which key did sign it; a
checkpoint's size is tlog-checkpoint's ASCII decimal below 2**64, never a crash; a private key
file others may read is used with a warning; a file far bigger than a key is refused unread.
"""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.keys import (
    KeyFileError,
    load_private_key,
    load_public_key,
    load_public_ref,
)
from agent_custody_state.ledger.chain import ChainHead
from agent_custody_state.ledger.checkpoints import (
    CheckpointError,
    note_key_id,
    parse_checkpoint,
    read_checkpoints,
    sign_checkpoint,
)
from agent_custody_state.server.signing import generate_key_pair

FACT: dict[str, Any] = {"subject": "acct:42", "predicate": "plan", "space": "org", "actor": "agent"}


@pytest.fixture
def rotated(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A ledger checkpointed every 2 events by an old key (events 1-4), then by a new one (5-8);
    returns the ledger and the two public keys."""
    old, old_pub, _ = generate_key_pair(tmp_path / "old.key")
    new, new_pub, _ = generate_key_pair(tmp_path / "new.key")
    path = tmp_path / "l.jsonl"
    for key in (old, new):
        with Ledger(path, checkpoint_key=key, checkpoint_every=2) as ledger:
            for n in range(4):
                ledger.assert_fact(**FACT, value=n)
    return path, old_pub, new_pub


def test_verify_takes_the_keys_before_and_after_a_rotation(
    rotated: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--key`` was a single value: a second one silently replaced the first, so a ledger whose
    checkpoints span a key rotation could not verify at all."""
    path, old_pub, new_pub = rotated
    argv = ["verify", "--ledger", str(path), "--key", str(old_pub), "--key", str(new_pub)]
    assert main(argv) == 0
    assert "4 checkpoint(s) (signatures verified)" in capsys.readouterr().out
    # Each key alone leaves the other key's checkpoints unsigned, and says which key signed them.
    assert main(["verify", "--ledger", str(path), "--key", str(new_pub)]) == 1
    out = capsys.readouterr().out
    old_id = note_key_id(_origin(path), load_public_key(old_pub)).hex()
    assert "the checkpoint of size 2: not signed by the key given (key id " in out
    assert f"it is signed by note key ID {old_id}" in out and "repeatable" in out


def test_a_bad_signature_by_a_key_given_fails_the_note(rotated: tuple[Path, Path, Path]) -> None:
    """signed-note: a signature by a known key that does not verify rejects the whole note,
    even when another known key's signature on it verifies."""
    path, old_pub, new_pub = rotated
    old, new = load_public_key(old_pub), load_public_key(new_pub)
    first = read_checkpoints(Path(f"{path}.checkpoints").read_text())[0]
    assert first.check_signature([new, old]) is None and first.check_signature(old) is None
    forged = f"\u2014 {first.origin} " + _b64(note_key_id(first.origin, new) + bytes(64))
    doubled = parse_checkpoint(first.note() + forged + "\n")
    assert "does not verify" in str(doubled.check_signature([old, new]))
    assert doubled.check_signature([old]) is None  # an unknown key's signature is ignored


@pytest.mark.parametrize("size", ["\u0663", "\u00b2", "9" * 5000, str(2**64), "+5", "05", " 5"])
def test_a_checkpoint_size_is_ascii_decimal_below_2_64(
    rotated: tuple[Path, ...], size: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """tlog-checkpoint: the size is ASCII decimal, no leading zero (a uint64 wherever it is
    read). ``str.isdigit`` took Arabic-Indic digits (read as a number) and ``²`` and 5,000
    digits (``int`` then raised a bare ValueError: ``verify`` ended in a traceback)."""
    path = rotated[0]
    lines = Path(f"{path}.checkpoints").read_text().split("\n")
    lines[1] = size
    with pytest.raises(CheckpointError, match="size line"):
        read_checkpoints("\n".join(lines))
    edited = path.with_name("edited.checkpoints")
    edited.write_text("\n".join(lines))
    assert main(["verify", "--ledger", str(path), "--checkpoint", str(edited)]) == 1
    assert "error: a checkpoint cannot be read: the size line" in capsys.readouterr().err


def test_a_checkpoint_file_with_crlf_line_ends_says_so(rotated: tuple[Path, ...]) -> None:
    """A checkpoint file converted to CR LF read as "no empty line before the signatures"."""
    crlf = Path(f"{rotated[0]}.checkpoints").read_text().replace("\n", "\r\n")
    with pytest.raises(CheckpointError, match="lines end in CR LF"):
        read_checkpoints(crlf)


def test_the_largest_size_parses(rotated: tuple[Path, ...]) -> None:
    lines = Path(f"{rotated[0]}.checkpoints").read_text().split("\n")
    lines[1] = str(2**64 - 1)
    assert read_checkpoints("\n".join(lines))[0].size == 2**64 - 1


def test_certificate_verify_takes_several_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``certificate verify --key A --key B`` used B alone (the last one)."""
    signer, signer_pub, _ = generate_key_pair(tmp_path / "a.key")
    _, other_pub, _ = generate_key_pair(tmp_path / "b.key")
    path, cert = tmp_path / "l.jsonl", tmp_path / "c.json"
    with Ledger(path) as ledger:
        fact = ledger.assert_fact(**FACT, value="secret").fact_id
    forget = ["forget", "--ledger", str(path), "--fact", fact, "--reason", "r"]
    assert main([*forget, "--certificate", str(cert), "--key", str(signer)]) == 0
    capsys.readouterr()
    keyid = load_public_ref(signer_pub).keyid
    for keys in ([signer_pub, other_pub], [other_pub, signer_pub]):
        flags = [arg for key in keys for arg in ("--key", str(key))]
        assert main(["certificate", "verify", str(cert), *flags, "--ledger", str(path)]) == 0
        assert f"signed by {keyid[:16]}" in capsys.readouterr().out
    assert main(["certificate", "verify", str(cert), "--key", str(other_pub)]) == 1
    assert f"--key {other_pub} is key " in capsys.readouterr().out


@pytest.mark.parametrize("mode", [0o640, 0o604])
def test_a_private_key_open_to_others_is_used_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: int
) -> None:
    """Whoever reads the signing key signs as the server: ``keygen`` writes it 0600, and a copy
    made under the default umask (0644) was read without a word."""
    private, _, _ = generate_key_pair(tmp_path / "m.key")
    with caplog.at_level(logging.WARNING, logger="agent_custody_state.keys"):
        load_private_key(private)
        assert not caplog.records
        private.chmod(mode)
        load_private_key(private)
        load_public_key(private)  # verify --key with the private key: warned once a process
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    assert str(private) in message and f"mode {mode:04o}" in message and "chmod 600" in message


def test_a_file_far_bigger_than_a_key_is_refused_unread(tmp_path: Path) -> None:
    """A ledger given as ``--key`` by mistake was read whole (gigabytes) before being refused,
    and ``/dev/zero`` never ended."""
    big = tmp_path / "l.jsonl"
    big.write_bytes(b"-----BEGIN PRIVATE KEY-----\n" + b"A" * 70_000)
    for load in (load_private_key, load_public_key):
        with pytest.raises(KeyFileError, match="more than 65536 bytes"):
            load(big)  # type: ignore[operator]


def test_a_private_key_of_another_kind_is_named_by_its_path(tmp_path: Path) -> None:
    """``verify --key`` given an EC private key said ``the key given``, not which file."""
    path = tmp_path / "ec.pem"
    path.write_bytes(
        generate_private_key(SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    with pytest.raises(KeyFileError, match=f"^{path} holds a .*, not an Ed25519 key"):
        load_public_key(path)


def test_a_ledger_without_events_is_not_checkpointed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A checkpoint names its ledger by the first event. One signed before any event (origin
    ``.../-``) read, once the first event was written, as another ledger's checkpoint: every
    later ``verify`` failed on it. It is now refused, and one an older version wrote is noted,
    not held against the ledger."""
    private, public, _ = generate_key_pair(tmp_path / "m.key")
    path = tmp_path / "l.jsonl"
    path.touch(0o600)  # an empty ledger file, as an operator prepares one
    assert main(["checkpoint", "--ledger", str(path), "--key", str(private)]) == 1
    assert "the ledger has no events" in capsys.readouterr().err
    assert not Path(f"{path}.checkpoints").exists()
    empty = "agent-custody-state/chain/-"  # the origin an older version signed it under
    old = sign_checkpoint(load_private_key(private), empty, ChainHead(0, "0" * 64), "t")
    Path(f"{path}.checkpoints").write_text(old.note())
    with Ledger(path, checkpoint_key=private, checkpoint_every=1) as ledger:
        ledger.assert_fact(**FACT, value=1)
    assert main(["verify", "--ledger", str(path), "--key", str(public)]) == 0
    captured = capsys.readouterr()
    assert "1 checkpoint(s) (signatures verified)" in captured.out
    assert "1 checkpoint(s) of size 0 signed while the ledger had no event" in captured.err


def _origin(path: Path) -> str:
    return "agent-custody-state/chain/" + str(
        json.loads(path.read_text().split("\n")[0])["eventId"]
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
