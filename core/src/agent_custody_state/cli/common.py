"""What every command shares: the one-line error, finding and opening a ledger safely, times.

Commands never create a folder (a missing one is usually an unmounted volume or a typo), and the
commands that only read or clean a ledger (``export``, ``sweep``, ``repair``) never create a
ledger either: before this rule, ``export`` of a mistyped path created an empty ledger and
reported "exported 0 events". Nor does a command that writes no value create a key store or
record crypto-shred mode with a ledger (``open_recorded``'s ``read_only``), and a command that
changes nothing opens the ledger read-only (``Ledger(read_only=True)``, ``open_recorded``'s
``reads_only``): no lock file, no torn line cut, the folder left byte-identical.
"""

from __future__ import annotations

import argparse
import errno
import os
import re
from contextlib import suppress
from pathlib import Path
from typing import Any

from agent_custody_state.cli.certfile import check_output as check_output
from agent_custody_state.cli.certfile import write_certificate as write_certificate
from agent_custody_state.cli.errors import CliError as CliError
from agent_custody_state.cli.errors import UsageError as UsageError
from agent_custody_state.cli.inputs import check_key_store, refuse_new_key_store
from agent_custody_state.cli.inputs import check_private_key as check_private_key
from agent_custody_state.cli.inputs import is_path as is_path
from agent_custody_state.ledger.backend import EventBackendError


def _loops(path: Path) -> bool:
    """Whether ``path`` is a symlink that ends in a loop (not one naming a missing file)."""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def check_location(location: str, *, must_exist: bool, flag: str = "--ledger") -> None:
    """Refuse a ledger path whose folder is missing, or (``must_exist``) that is not there."""
    if not location.strip():
        raise CliError(f"{flag} is empty; name the ledger (a file, or a URL)")
    if not is_path(location):
        return
    path = Path(location)
    if path.is_symlink() and not path.exists() and _loops(path):
        raise CliError(f"{flag} {location}: a loop of symlinks (each names another); name the file")
    if must_exist and not path.exists():
        raise CliError(
            f"{flag} {location}: no such ledger; check the path (this command "
            "never creates a ledger)"
        )
    if not path.parent.is_dir():
        raise CliError(
            f"{flag} {location}: the folder {path.parent} does not exist; create it "
            "first (ledgers are never created in missing folders)"
        )
    if path.is_dir():
        raise CliError(f"{flag} {location} is a folder; name the ledger file inside it")


#: What ``--forget-mode`` says of its default where a command opens an existing ledger.
RECORDED = "the mode the ledger records (crypto-shred with its key store), else plain"


def add_forget_mode_flags(
    parser: argparse.ArgumentParser, *, default: str = RECORDED, key_store: str | None = None
) -> None:
    """``--forget-mode`` and ``--key-store``, for every command that opens a ledger;
    ``default`` says what happens without them, ``key_store`` replaces the key store's help."""
    parser.add_argument(
        "--forget-mode",
        choices=("plain", "crypto-shred"),
        help="crypto-shred: values encrypted, forget destroys the key (docs/forget.md); "
        f"default: {default}",
    )
    parser.add_argument(
        "--key-store",
        metavar="LOCATION",
        help=key_store
        or "crypto-shred key store (default: the one the ledger records, else beside the "
        "ledger, or <db>_keys for PostgreSQL)",
    )


def missing_keys(location: str, store: str) -> CliError:
    """The refusal when the key store a crypto-shred ledger records is not there."""
    return CliError(
        f"{location} is written in crypto-shred mode and its key store {store} is not there; "
        f"{KEYS_ADVICE}"
    )


KEYS_ADVICE = (
    "pass --key-store LOCATION (or --forget-mode plain to read the sealed values as stored)"
)


def plain_ledger(location: str) -> CliError:
    """The refusal of crypto-shred mode, asked by a command that does not write values, for a
    ledger that records plain mode: opening it so would create a key store and mark the ledger
    (docs/decisions.md, "Reads never change a ledger's mode")."""
    return CliError(
        f"{location} records plain mode (no crypto-shred mark, no key store); this command does "
        "not change a ledger's mode or create a key store: run it without --forget-mode "
        "crypto-shred"
    )


def no_key_store(store: str) -> CliError:
    """The refusal of a ``--key-store`` path that is not there, by a command that does not
    write values (it never creates a key store: a new, empty one reads every value as null)."""
    return CliError(f"--key-store {store}: no such key store")


def open_ledger(
    args: argparse.Namespace,
    *,
    must_exist: bool = True,
    writes: bool = False,
    changes: bool = False,
    **kwargs: Any,
) -> Any:
    """The ledger named by ``--ledger`` (imported lazily: ``--help`` stays fast), in the forget
    mode of ``--forget-mode``/``--key-store`` where the command has them (a flag wins over
    ``kwargs``), else in the mode the ledger records (``open_recorded``). Unless the command
    ``writes`` values (``import``), the open never changes the ledger's mode: no key store is
    created and no mark recorded (``open_recorded``'s ``read_only``). Unless it ``writes`` or
    ``changes`` the ledger otherwise (``repair``, ``checkpoint``), the ledger is opened
    read-only (``reads_only``)."""
    check_location(args.ledger, must_exist=must_exist)
    mode = {f: getattr(args, f) for f in ("forget_mode", "key_store") if getattr(args, f, None)}
    if mode.get("key_store") is not None and mode.get("forget_mode") is None:
        mode["forget_mode"] = "crypto-shred"  # a key store says which mode is meant
    reads_only = not (writes or changes)
    return open_recorded(
        args.ledger, read_only=not writes, reads_only=reads_only, **{**kwargs, **mode}
    )


def open_recorded(
    location: str, *, read_only: bool = False, reads_only: bool = False, **kwargs: Any
) -> Any:
    """The ledger at ``location`` in the forget mode ``kwargs`` name, else in the mode recorded
    with it (``modemark``): a ledger written in crypto-shred mode is opened in that mode with
    the key store it records, so its values read as values, not as the envelopes that seal
    them. A recorded key store that is not there, or cannot be opened, is a one-line error (a
    new, empty one would read every value as forgotten).

    Crypto-shred mode asked without a key store uses the one the ledger records, if any.
    ``read_only`` (a command that writes no value) never changes the ledger's mode: crypto-shred
    mode asked for a ledger that records plain mode is refused (``plain_ledger``) unless a key
    store that exists is named, a named key store path that is not there is refused, and the
    mark is not recorded, not even for a ledger from before the mark (its keys beside it).
    ``reads_only`` (a command that changes nothing; implies ``read_only``): the ledger is
    opened read-only (``Ledger(read_only=True)``), so the open changes no file of it."""
    from agent_custody_state.ledger.ledger import Ledger
    from agent_custody_state.ledger.modemark import CRYPTO_SHRED, sealed_unmarked

    asked = kwargs.pop("forget_mode", None)
    named = kwargs.pop("key_store", None)
    read_only = read_only or reads_only
    if isinstance(named, str) and is_path(named):  # not opened unless it is one
        check_key_store(named, "--key-store", may_create=not read_only)
    backend = open_backend(location, read_only=reads_only)
    mark = store = None
    from_mark = False  # opened with the key store the mark records
    try:
        # Crypto-shred without a key store named, or for a command that writes no value: the
        # key store the ledger records, if it records one.
        recorded_keys = asked == CRYPTO_SHRED and (read_only or named is None)
        if (asked, named) != (None, None) and not recorded_keys:
            if not read_only:  # never a new, empty key store beside sealed values
                refuse_new_key_store(location, backend, named)
            mode = {"forget_mode": asked} if asked is not None else {}
            return Ledger(backend, **mode, key_store=named, **kwargs)
        mark = backend.recorded_forget_mode()
        recorded = mark is not None and mark.mode == CRYPTO_SHRED
        if asked is not None:  # crypto-shred
            if named is not None:  # for a command that writes no value
                if not reads_only:  # a forget: the key store the mark records, named
                    refuse_new_key_store(location, backend, named)
                keys = _existing_keys(location, named, recorded=recorded)
                return _crypto(backend, keys, kwargs, read_only=True)
            if not recorded:
                if read_only:
                    raise plain_ledger(location)
                # A writer starting crypto-shred mode: the backend's default key store.
                return Ledger(backend, forget_mode=CRYPTO_SHRED, **kwargs)
        if mark is None and asked is None and sealed_unmarked(backend):
            raise CliError(
                f"{location} holds values sealed in crypto-shred mode but records no mode "
                "(written before the mark) and its key store is not beside it; pass "
                "--forget-mode crypto-shred --key-store LOCATION (or --forget-mode plain to read "
                "the sealed values as stored)"
            )
        if mark is None or not recorded:
            return Ledger(backend, **kwargs)
        from_mark, store = True, mark.key_store
        if store is not None and is_path(store) and not Path(store).exists():
            raise missing_keys(location, store)
        return _crypto(backend, store, kwargs, read_only=read_only)
    except EventBackendError as exc:
        with suppress(Exception):
            backend.close()
        if not from_mark:
            raise
        if store is not None and not is_path(store):
            ledger = _default_keys(
                location, store, kwargs, read_only=read_only, reads_only=reads_only
            )
            if ledger is not None:  # recorded without its password
                return ledger
        raise CliError(
            f"{location} is written in crypto-shred mode and its key store "
            f"{store or '(the default)'} cannot be opened ({exc}); {KEYS_ADVICE}"
        ) from None
    except BaseException:
        with suppress(Exception):
            backend.close()
        raise


def _existing_keys(location: str, named: Any, *, recorded: bool) -> Any:
    """``named`` (``--key-store``) for a command that writes no value: a path must be a key
    store that exists; any other location (a URL, which cannot be looked at without opening
    it) only for a ledger that records crypto-shred mode."""
    if isinstance(named, str) and is_path(named):
        if not Path(named).is_file():
            raise no_key_store(named)
    elif not recorded:
        raise plain_ledger(location)
    return named


def _crypto(backend: Any, store: Any, kwargs: dict[str, Any], *, read_only: bool) -> Any:
    """The ledger on ``backend`` in crypto-shred mode with the key store ``store`` (None: the
    backend's default); ``read_only``: without recording the mode (``shred.shredding``)."""
    from agent_custody_state.ledger.ledger import Ledger
    from agent_custody_state.ledger.modemark import CRYPTO_SHRED
    from agent_custody_state.ledger.shred import shredding

    if not read_only:
        return Ledger(backend, forget_mode=CRYPTO_SHRED, key_store=store, **kwargs)
    sealed = shredding(backend, store, mark=False)  # closes the backend if refused
    try:
        return Ledger(sealed, forget_mode=CRYPTO_SHRED, **kwargs)
    except BaseException:
        with suppress(Exception):
            sealed.close()
        raise


def _default_keys(
    location: str, store: str, kwargs: dict[str, Any], *, read_only: bool, reads_only: bool
) -> Any:
    """The ledger with its backend's default key store when that is the one recorded (a
    display form, without the password the ledger's own URL holds), else None."""
    backend = open_backend(location, read_only=reads_only)
    try:
        ledger = _crypto(backend, None, kwargs, read_only=read_only)
    except EventBackendError:
        with suppress(Exception):
            backend.close()
        return None
    if ledger.backend.keystore().location == store:
        return ledger
    ledger.close()
    return None


def open_backend(location: str, *, read_only: bool = False) -> Any:
    """The event backend at ``location`` (``read_only``: opened so, ``Ledger``'s option); a
    driver's own error (SQLAlchemy that cannot parse a URL, say) becomes one line naming the
    location, without its password."""
    from agent_custody_state.ledger.errors import LedgerError
    from agent_custody_state.ledger.host import default_host
    from agent_custody_state.plugins import PluginError

    try:
        options = {"read_only": True} if read_only else {}  # a backend may not know it
        return default_host().open_backend(location, **options)
    except (CliError, LedgerError, EventBackendError, PluginError, OSError, UnicodeError):
        raise
    except Exception as exc:
        raise CliError(
            f"--ledger {without_password(location)}: cannot open it ({type(exc).__name__}: "
            f"{exc}); check the location, e.g. {LEDGER_KINDS.split(', or ')[-1]}"
        ) from None


def without_password(location: str) -> str:
    """``location`` with the password of a ``scheme://user:password@host`` URL replaced."""
    return re.sub(r"^([a-zA-Z][a-zA-Z0-9+.-]*://[^/:@]*):[^/@]*@", r"\1:***@", location)


#: What a ledger location may be (the start of every ``--ledger`` help).
LEDGER_KINDS = "the ledger: a .jsonl or .sqlite/.db file, or postgresql://user@host/db?table=name"
LEDGER_HELP = f"{LEDGER_KINDS}; it must exist (this command never creates one)"

TIME_FORMAT = "RFC 3339 with an offset, e.g. 2026-01-01T00:00:00Z or 2026-01-01T09:00:00+09:00"


def add_ledger_argument(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """``--ledger LOCATION`` with the help every reading command shares."""
    parser.add_argument("--ledger", required=required, metavar="LOCATION", help=LEDGER_HELP)


def add_json_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--json", action="store_true", help=f"print {what} as JSON instead")


def time_option(value: str | None, flag: str) -> str | None:
    """A time flag in the wire form, or a one-line error naming the flag and the format."""
    if value is None:
        return None
    from agent_custody_state.timeutil import TimeFormatError, normalize_time

    try:
        return normalize_time(value)
    except TimeFormatError as exc:
        raise UsageError(f"{flag}: {exc}") from None


# -- erasure certificates (``forget --certificate``, ``sweep --certificates``) --


def certificate_key(args: argparse.Namespace, config: Any) -> str | None:
    """``--key``, else the config file's ``key`` (the key that signs results)."""
    key: str | None = args.key or (config.key if config is not None else None)
    return check_private_key(key)


def server_stopped(exc: Exception, log: str) -> Exception:
    """What ``demo`` raises when its tour failed: when its memory server said why it stopped (an
    ``error:`` line in the server's log, printed above), one ``error:`` line pointing at it
    rather than the MCP client's traceback of the closed connection; else ``exc`` itself."""
    if not any(line.startswith("error: ") for line in log.splitlines()):
        return exc
    return CliError("the demo's memory server stopped (its error is above); the tour ends here")
