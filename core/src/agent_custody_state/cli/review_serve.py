"""``review`` without ``--out``: the review site served on loopback until SIGTERM or SIGINT.

The server is ``extras.review_server.ReviewServer`` (it refuses a non-loopback address); this
announces it on stderr, serves it, and stops it cleanly on a signal, as ``serve`` stops.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import AbstractContextManager
from typing import Any

from agent_custody_state.cli.common import CliError, without_password


def serve_review(options: Any, args: argparse.Namespace) -> int:
    """Serve the review site of ``options`` on ``--host``/``--port`` until a signal (exit 0)."""
    from agent_custody_state.extras.review_server import NotLoopbackError, ReviewServer

    try:
        server = ReviewServer(options, args.host, args.port)
    except NotLoopbackError as exc:
        raise CliError(str(exc)) from None
    ledger = f" ledger={without_password(args.ledger)}" if args.ledger else ""
    mode = " verifying" if options.keys is not None else " not verifying (no keys given)"
    print(
        f"agent-custody-memory review: {server.url} receipts={args.receipts}{ledger}{mode}",
        file=sys.stderr,
        flush=True,
    )
    with _stop_on_signals(server):
        try:
            server.serve_forever(poll_interval=0.2)
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return 0


def _stop_on_signals(server: Any) -> AbstractContextManager[None]:
    """SIGTERM and SIGINT stop the server cleanly (exit 0), as they stop ``serve``."""
    import signal
    import threading
    from contextlib import contextmanager

    @contextmanager
    def handled() -> Any:
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def stop(_sig: int, _frame: Any) -> None:
            threading.Thread(target=server.shutdown, daemon=True).start()

        previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    return handled()
