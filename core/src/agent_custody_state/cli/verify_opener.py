"""What ``verify`` opens crypto-shred values with, to check their commitments.

The key store named by ``--key-store`` (``default``: the one beside a file ledger), else the
one the ledger records; nothing in plain mode. Nothing is created or marked, and a JSONL
ledger's mark and key store are read beside the file, without loading its events.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent_custody_state.cli.common import (
    is_path,
    missing_keys,
    no_key_store,
    open_ledger,
    plain_ledger,
)
from agent_custody_state.cli.inputs import check_key_store


@contextmanager
def value_opener(args: argparse.Namespace, *, jsonl: bool) -> Iterator[Any]:
    """What opens sealed values to check their commitments: from ``--key-store`` (``default``:
    the one beside a file ledger), else from the key store the ledger records (``modemark``);
    None in plain mode. Nothing is created or marked: crypto-shred mode asked for a ledger that
    records plain mode is refused (``plain_ledger``), a key store that is not there too. A
    JSONL ledger is not opened through its backend (a broken line must be reported, not refuse
    the open; ``jsonl``: ``args.ledger`` is one)."""
    from agent_custody_state.ledger.modemark import CRYPTO_SHRED
    from agent_custody_state.ledger.shred import value_opener as opener_of

    if args.forget_mode == "plain":
        yield None
        return
    named = args.key_store is not None or args.forget_mode == CRYPTO_SHRED
    where = args.key_store
    if where == "default":
        where = _default_keys(args.ledger) if is_path(args.ledger) else None
    if jsonl:
        marks = _file_marks(Path(args.ledger))
        mark = marks.recorded_forget_mode()
        if where is None:
            if mark is None or mark.mode != CRYPTO_SHRED:
                if named:
                    raise plain_ledger(args.ledger)
                yield None
                return
            where = mark.key_store or _default_keys(args.ledger)
        if not Path(where).is_file():
            if args.key_store is not None:
                raise no_key_store(where)
            raise missing_keys(args.ledger, where)
        check_key_store(where, "--key-store", may_create=False)  # not opened unless it is one
        keys = marks.keystore(where)
        try:
            yield opener_of(keys)
        finally:
            keys.close()
        return
    mode = argparse.Namespace(
        ledger=args.ledger, forget_mode=CRYPTO_SHRED if named else None, key_store=where
    )
    with open_ledger(mode, chain=False) as ledger:  # never creates or marks (read only)
        shred = ledger.forget_mode == CRYPTO_SHRED
        yield opener_of(ledger.backend.keystore()) if shred else None


def _default_keys(ledger: str) -> str:
    """A file ledger's default key store, as its backend finds it whatever spelling names the
    ledger (``files.FileNames``: beside the file itself, or one an older version named after a
    symlink)."""
    from agent_custody_state.ledger.files import FileNames

    return str(FileNames.of(ledger).find("keys", "key store", ledger))


def _file_marks(path: Path) -> Any:
    """A JSONL ledger's forget-mode mark and key store, read as its backend reads them (the
    same mixins), without loading its events."""
    from agent_custody_state.backends.keystore_file import SidecarKeys
    from agent_custody_state.ledger.modemark import ModeFile, ModeMark

    class NoMark:
        def recorded_forget_mode(self) -> ModeMark | None:
            return None

    class FileMarks(SidecarKeys, ModeFile, NoMark):
        def __init__(self) -> None:
            self.path = path

    return FileMarks()
