"""Files a command is told to read or add to, looked at before they are opened.

A key store is a SQLite file the store itself marks (``keystore_file.APPLICATION_ID``); opening
any other SQLite file as one set its journal mode (``DELETE``) before the store saw it was not
a key store, so ``--key-store ledger.sqlite`` turned a WAL ledger into a rollback-journal one,
and a reading command given an empty file made a key store of it. A checkpoints file holds
signed notes, each opening with the chain's origin line: ``checkpoint --checkpoints`` naming the
ledger appended a note to its events. Each is refused here by what the file holds, read without
changing it (no lock, no SQLite connection).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

from agent_custody_state.cli.errors import CliError

_SCHEME = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:")
_SQLITE = b"SQLite format 3\x00"
#: Where SQLite keeps ``PRAGMA application_id`` in a database's header (big-endian).
_APPLICATION_ID_AT = 68


def _kind(mode: int) -> str | None:
    """What a file that is not a regular file is, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def is_path(location: str) -> bool:
    """A file location (not ``postgres://...`` or ``memory:``): what the folder checks apply to."""
    return _SCHEME.match(location) is None


def check_private_key(key: str | None) -> str | None:
    """``key``, unless it is the public half (``keygen``'s ``.pub``) of the key meant: the
    signing key's own error would then say to create a key that exists."""
    if key is None:
        return None
    try:
        with open(key, "rb") as fh:
            public = b"-----BEGIN PUBLIC KEY-----" in fh.read(4096)
    except OSError:
        return key  # the key's own loader says what is wrong with the file
    if public:
        private = key.removesuffix(".pub") if key.endswith(".pub") else "the file without .pub"
        raise CliError(f"{key} is a public key; pass the private key ({private})")
    return key


def check_key_store(location: str, flag: str, *, may_create: bool) -> None:
    """Refuse a key store path that is there but is not a key store: a folder, a FIFO, a file
    that is not a SQLite database, or a SQLite database not marked as a key store (a ledger,
    most often). An empty file is a key store not made yet: refused too unless the command
    ``may_create`` one (a command that writes values). A path that is not there is left to
    the command (which creates it, or says it is missing)."""
    from agent_custody_state.backends.keystore_file import APPLICATION_ID

    try:
        mode = os.stat(location).st_mode
    except OSError:
        return
    kind = _kind(mode)
    if kind is not None:
        raise CliError(f"{flag} {location} is {kind}, not a key store; name the key store file")
    try:
        with open(location, "rb") as fh:
            head = fh.read(100)
    except OSError:
        return  # the key store's own open says what is wrong
    if not head:
        if may_create:
            return
        raise CliError(
            f"{flag} {location} is an empty file, not a key store; this command creates no key "
            "store: name the one the ledger's values are sealed with"
        )
    if not head.startswith(_SQLITE):
        raise CliError(
            f"{flag} {location} is not a key store (not a SQLite database); name the key store "
            "file (by default <ledger>.keys beside the ledger)"
        )
    app = int.from_bytes(head[_APPLICATION_ID_AT : _APPLICATION_ID_AT + 4], "big")
    if len(head) >= _APPLICATION_ID_AT + 4 and app != APPLICATION_ID:
        raise CliError(
            f"{flag} {location} is a SQLite database but not a key store (a ledger?); it was "
            "not opened: name the key store file (by default <ledger>.keys beside the ledger)"
        )


def check_checkpoints_file(location: str, flag: str) -> None:
    """Refuse a checkpoints file to add to that is not one: a folder, a FIFO or a device (an
    append there blocked or went nowhere), a missing folder, or a file with something else in
    it (the ledger itself, a key): every checkpoint opens with the chain's origin line."""
    from agent_custody_state.ledger.checkpoints import ORIGIN_PREFIX

    path = Path(location)
    if not location.strip():
        raise CliError(f"{flag} is empty; name the checkpoints file")
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise CliError(
                f"{flag} {location}: the folder {path.parent} does not exist; create it first "
                "(no command creates a missing folder)"
            ) from None
        return
    except OSError as exc:  # a name too long, a loop of links: said before the ledger opens
        raise CliError(f"{flag} {location}: {exc.strerror or exc}") from None
    kind = _kind(mode)
    if kind is not None:
        raise CliError(f"{flag} {location} is {kind}; name a checkpoints file (a text file)")
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(ORIGIN_PREFIX))
    except OSError:
        return
    if head and head != ORIGIN_PREFIX.encode():
        raise CliError(
            f"{flag} {location} holds something other than checkpoints (each opens with "
            f"{ORIGIN_PREFIX}...); nothing was added to it: name a checkpoints file, or a new one"
        )


def read_checkpoint_file(location: str, flag: str = "--checkpoint") -> str:
    """A checkpoints file's text for ``verify``, with an error naming it: a device is refused
    (``/dev/zero`` was read until memory ran out); a pipe is read (``<(...)``)."""
    try:
        mode = os.stat(location).st_mode
    except OSError as exc:
        raise CliError(f"{flag} {location}: {exc.strerror or exc}") from None
    kind = _kind(mode)
    if kind not in (None, "a FIFO"):
        raise CliError(f"{flag} {location} is {kind}; name a checkpoints file")
    try:
        with open(location, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise CliError(f"{flag} {location}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(
            f"{flag} {location}: not UTF-8 text (byte {exc.start}); a checkpoints file is the "
            "text `checkpoint` prints"
        ) from None


def parsed_checkpoints(notes: list[tuple[str, str]]) -> list[Any]:
    """Every checkpoint in ``notes`` (``(where, text)``: ``where`` is appended to the error,
    so a checkpoint that cannot be read is named by the file it came from)."""
    from agent_custody_state.ledger.checkpoints import CheckpointError, read_checkpoints

    found: list[Any] = []
    for where, text in notes:
        try:
            found += read_checkpoints(text)
        except CheckpointError as exc:
            raise CliError(f"a checkpoint cannot be read: {exc}{where}") from None
    return found


def signing_key(path: str) -> Any:
    """``--key K``'s private key, loaded before anything is opened (a public key is refused
    naming the private one: ``check_private_key``)."""
    from agent_custody_state.keys import KeyFileError, load_private_key

    try:
        return load_private_key(check_private_key(path) or path)
    except KeyFileError as exc:
        raise CliError(str(exc)) from None


def not_a_file(location: str, want: str) -> str:
    """Why ``location`` is not the regular file (``want``: "certificate file") a command reads:
    a folder and a FIFO were both reported as "no such file"."""
    try:
        kind = _kind(os.stat(location).st_mode)
    except OSError:
        return f"no such {want}; check the path"
    if kind in (None, "a folder"):
        return f"is {kind or 'a file'}, not a {want}"
    return f"is {kind}, not a {want}; save what it carries to a file first"


def refuse_new_key_store(location: str, backend: Any, named: Any) -> None:
    """Refuse a writer's ``--key-store`` path that is not there when the ledger records
    crypto-shred mode: a new, empty key store holds none of its values' keys, so ``forget
    --key-store TYPO`` failed "its key is gone ... keep_digest=False", and with ``--no-digest``
    reported the fact forgotten while its key stayed in the key store the ledger records."""
    from agent_custody_state.ledger.modemark import CRYPTO_SHRED

    if not (isinstance(named, str) and is_path(named)) or os.path.lexists(named):
        return
    mark = backend.recorded_forget_mode()
    if mark is None or mark.mode != CRYPTO_SHRED:
        return
    raise CliError(
        f"--key-store {named}: no such key store; {location} records crypto-shred mode with the "
        f"key store {mark.key_store or '(the default, beside it)'}, which holds its values' keys "
        "(a new one would hold none, and a forget would destroy no key): leave out --key-store, "
        "or name the key store that holds them"
    )


def check_folder(location: str, flag: str) -> None:
    """Refuse a certificates folder that is there but is no folder (it was "certificates FILE:
    File exists"); a missing one is left to the caller, which says so."""
    try:
        mode = os.stat(location).st_mode
    except OSError:
        return
    if not stat.S_ISDIR(mode):
        raise CliError(
            f"{flag} {location} is {_kind(mode) or 'a file'}, not a folder; name the folder the "
            "certificates are kept in"
        )
