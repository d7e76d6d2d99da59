"""``keygen``: a new Ed25519 key pair for signing receipts, checkpoints and certificates.

The keys are the command's product, its two lines on standard output the report: with standard
output closed (``>&-``) it refuses before writing any key (a script saw exit 1 with the keys
written, and its retry was refused: "already exists"); when the lines cannot be printed after
the keys are written (a full disk, a reader gone), it still exits 1, saying that the keys were
written and stand.
"""

from __future__ import annotations

import argparse
import sys

from agent_custody_state.cli.common import CliError
from agent_custody_state.controltext import shown


def cmd_keygen(args: argparse.Namespace) -> int:
    """Write ``--out`` (private, mode 0600) and ``--out``.pub, then say so (module docstring)."""
    from agent_custody_state.cli.serve_setup import key_output
    from agent_custody_state.server.signing import generate_key_pair

    key_output(args.out)
    # Standard output closed (``>&-``) refuses even an empty write: before any key is written
    sys.stdout.write("")
    try:
        private, public, key_id = generate_key_pair(args.out, force=args.force)
    except FileExistsError as exc:
        raise CliError(str(exc)) from None
    try:
        print(
            shown(
                f"wrote {private} (private key, mode 0600) and {public} "
                "(public key, for the gateway)"
            )
        )
        print(f"key id {key_id}")
        sys.stdout.flush()
    except OSError as exc:  # a full disk, a reader gone: the keys stand, say so on stderr
        what = exc.strerror or type(exc).__name__
        raise CliError(
            f"wrote {private} and {public} (key id {key_id}), but could not print it on "
            f"standard output ({what}); the keys are ready to use"
        ) from None
    return 0
