"""The demo's closing "next steps": commands the user can paste into the shell they ran it from.

They name this command line as that shell runs it (``command``): ``agent-custody-memory``
when its ``PATH`` finds this very one, else the running one by its path (the script next to
the interpreter, or ``<python> -m agent_custody_state``). A runner's ``PATH`` is not the
user's: nox (``./dev demo``), tox and ``uv run`` put their virtualenv's ``bin`` first for the
command they run, and it is gone once they return. Under one (``RUNNERS``), the demo printed
``agent-custody-memory ...``, which the user's shell did not find. Paths are computed when the
demo runs, never written into the repository.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable

NAME = "agent-custody-memory"
#: What a runner sets for the command it runs, and only for it (its ``PATH`` is not the user's):
#: nox's session, tox's environment, ``uv run``.
RUNNERS = ("NOX_CURRENT_SESSION", "TOX_ENV_DIR", "UV_RUN_RECURSION_DEPTH")


def under_runner() -> bool:
    """Whether a runner started this process (``RUNNERS``): its ``PATH`` goes with it."""
    return any(os.environ.get(marker) for marker in RUNNERS)


def command() -> str:
    """How to run this command line as printed, in the shell the user ran it from:
    ``agent-custody-memory`` when that is what the ``PATH`` finds and the ``PATH`` is the
    user's (not a runner's), else the running one by its path."""
    script = sys.argv[0] if os.path.basename(sys.argv[0]) == NAME else None
    running = script or os.path.join(os.path.dirname(sys.executable), NAME)
    found = shutil.which(NAME)
    try:
        if found is not None and os.path.samefile(found, running) and not under_runner():
            return NAME
    except OSError:
        pass
    if script is not None:
        return shlex.quote(os.path.abspath(script))
    return f"{shlex.quote(sys.executable)} -m agent_custody_state"


def next_steps(ledger: str, cli: str = NAME) -> list[str]:
    """Commands to try on the kept ledger; the demo test runs each of them."""
    quoted = shlex.quote(ledger)
    return [
        f"{cli} facts --ledger {quoted}",
        f"{cli} timeline acct:42 --ledger {quoted}",
        f"{cli} verify --ledger {quoted}",
    ]


def print_next_steps(paint: Callable[[str, str], str], ledger: str, *, keep: bool) -> None:
    """The demo's last lines: what to run next, each runnable as printed."""
    print("\n" + paint("1", "next steps") + paint("2", " (each runs as printed):"))
    cli = command()
    if keep:
        for hint in next_steps(ledger, cli):
            print("   " + hint)
    else:
        print(f"   {cli} demo --keep      # keep the ledger to look inside it")
    print(f"   {cli} serve --help     # run the memory server for your gateway")
    print(f"   {cli} --help           # every command")
