"""The files a command writes a signed erasure certificate to (``forget --certificate``, the
sweep's ``--certificates`` folder): refused before any work when they cannot be written, and
written whole or not at all (``write_certificate``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_custody_state.cli.errors import CliError


def check_output(path: str, flag: str, *, folder: bool = False) -> Path:
    """Refuse an output that exists (a file) or whose folder is missing, before any work."""
    out = Path(path)
    if folder:
        from agent_custody_state.cli.inputs import check_folder

        check_folder(path, flag)
        if not out.is_dir():
            raise CliError(f"{flag} {path}: no such folder; create it first")
        return out
    if out.is_dir():
        raise CliError(f"{flag} {path} is a folder; name the file in it, e.g. {out / 'fact.json'}")
    if out.exists():
        raise CliError(f"{flag} {path} already exists; certificates are never overwritten")
    if not out.parent.is_dir():
        raise CliError(
            f"{flag} {path}: the folder {out.parent} does not exist; create it first "
            "(no command creates a missing folder)"
        )
    return out


def configured_archive(config: Any, key: str | None) -> Path | None:
    """The ``certificates`` folder of the ``--config`` file, made ready (as ``serve`` makes
    it), or None when the file sets none. A command that forgets with the server's config
    keeps its certificates there as the server does: ``certificate reapply`` re-applies what
    the folder lists after a restore, and a forget or sweep run from the command line (the
    nightly ``sweep --config``) was missing from it. Refused, before any work, without a key
    or when the folder cannot hold files."""
    from agent_custody_state.stores.archive import CertificateArchive

    folder = getattr(config, "certificates", None) if config is not None else None
    if not folder:
        return None
    if key is None:
        raise CliError(
            "certificates in the --config file needs key: erasure certificates are signed "
            "with the key that signs results; add key = ... to the file, or pass --key K"
        )
    from agent_custody_state.cli.inputs import check_folder

    check_folder(folder, "certificates")
    try:
        CertificateArchive(folder).prepare()
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return Path(folder)


def write_certificate(path: Path, envelope: dict[str, Any]) -> None:
    """The envelope as pretty JSON, whole or not at all, never over another file: written
    aside, fsynced, then linked into place. The forget it certifies is done and it cannot be
    issued again (its byte scan needed the value), so if the disk refuses it (full, a file size
    limit) it is printed on standard output instead and ``CliError`` names the file and the
    cause: before, a full disk left half a certificate at ``path`` ("error: File too large")."""
    import sys

    from agent_custody_state.stores.archive import write_new

    text = json.dumps(envelope, indent=2) + "\n"
    try:
        write_new(path, text.encode("utf-8"))
    except OSError as exc:
        sys.stdout.write(text)
        sys.stdout.flush()
        raise CliError(
            f"the fact is forgotten, but its certificate could not be written to {path}: "
            f"{exc.strerror or exc}; nothing was left there. The certificate is printed above "
            "on standard output: keep it, it cannot be issued again"
        ) from None


def public_keys(names: list[str]) -> dict[str, tuple[str, Any]]:
    """``--key PUB`` files by key id: (the name given, the key), each key once."""
    from agent_custody_state.keys import KeyFileError, load_public_ref

    keys: dict[str, tuple[str, Any]] = {}
    for name in names:
        try:
            ref = load_public_ref(name)
        except KeyFileError as exc:
            raise CliError(f"--key: {exc}") from None
        keys.setdefault(ref.keyid, (name, ref))
    return keys


def load_public_keys(names: list[str]) -> list[Any]:
    """The ``--key PUB`` files' keys (``PublicKeyRef``), as ``certificate verify`` reads them."""
    return [ref for _, ref in public_keys(names).values()]
