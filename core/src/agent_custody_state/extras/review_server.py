"""The review pages served on loopback, or written as static files (SPEC-EXTRAS 5).

The server has no authentication of its own, so it binds only a loopback address and answers only
requests addressed to it by a loopback name (a foreign ``Host`` is a DNS-rebinding page reading
the receipts through the user's browser: 421). It is read-only: GET and HEAD, routed by path
alone. Every response carries ``cache-control: no-store``, ``x-frame-options: DENY`` and the
content security policy of the pages.

It serves only what the index lists (``review.listed_receipt``): a receipt's page and its bundle
re-serialised (as the static pages write it, never a file's bytes as they are on disk), for a
regular file of bounded size in the receipts directory that is a receipt bundle stored under its
own id. Anything else under ``/r/`` is a 404, whatever the file is: not a bundle, damaged, a
symbolic link (to a private key, say), a FIFO, a huge file.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agent_custody_state.extras import reviewfiles
from agent_custody_state.extras.bundles import RECEIPT_ID
from agent_custody_state.extras.erased import erasures, redacted_bundle
from agent_custody_state.extras.jsview import pretty
from agent_custody_state.extras.review import (
    CSP,
    ReviewOptions,
    ReviewRun,
    list_receipts,
    listed_receipt,
    receipt_page,
    render_index,
    served_bundle,
)
from agent_custody_state.signing import well_formed
from agent_custody_state.temporaries import pattern, remove_stale, temporary

HEADERS = {
    "cache-control": "no-store",
    "x-frame-options": "DENY",
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


class NotLoopbackError(ValueError):
    """A ``--host`` that is not a loopback address."""


def check_loopback(host: str) -> None:
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise NotLoopbackError(
            f"--host {host} is not a loopback address; the review has no authentication of "
            "its own, so it serves on loopback only (127.0.0.1, ::1, localhost); to share the "
            "pages, write them with --out DIR"
        )


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class _Handler(BaseHTTPRequestHandler):
    server: ReviewServer
    protocol_version = "HTTP/1.0"
    server_version = "agent-custody-review"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        return  # the review prints its URL once; per-request lines would only be noise

    def _send(self, status: int, kind: str, body: str | bytes, head: bool = False) -> None:
        data = well_formed(body).encode("utf-8") if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("content-type", kind)
        for name, value in HEADERS.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The stdlib's own errors (a malformed request line) with the same headers as the rest."""
        with contextlib.suppress(OSError):
            self._send(code, "text/plain", message or "bad request")

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def _refuse(self) -> None:
        self._send(405, "text/plain", "read-only: GET and HEAD only")

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse

    def _answer(self, *, head: bool) -> None:
        if not self.server.host_allowed(self.headers.get("host")):
            self._send(
                421,
                "text/plain",
                "misdirected request: this review answers on loopback names only",
                head,
            )
            return
        status, kind, body = self.server.respond(urlsplit(self.path).path)
        self._send(status, kind, body, head)


def bind_error(exc: OSError, host: str, port: int) -> OSError:
    """``exc`` (the bind's failure) naming the address it could not listen on and, for a port
    in use, what to do: it said only "Address already in use"."""
    where = f"{url_host(host)}:{port}"
    what = exc.strerror or str(exc)
    if exc.errno == errno.EADDRINUSE:
        what = (
            "the port is in use (another review or server listens there); stop it, or "
            "choose another port (--port; 0 picks a free one)"
        )
    return OSError(exc.errno, f"cannot listen on {where}: {what}")


class ReviewServer(ThreadingHTTPServer):
    """Serves one review; ``url`` is where it listens once bound."""

    daemon_threads = True

    def __init__(self, options: ReviewOptions, host: str = "127.0.0.1", port: int = 8791) -> None:
        check_loopback(host)
        self.options = options
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # Ledger reads and page building one at a time: a slow client never blocks the others,
        # but the ledger is not shared between threads mid-read.
        self._lock = threading.Lock()
        try:
            super().__init__((host, port), _Handler)
        except OSError as exc:
            raise bind_error(exc, host, port) from None
        self.host = host
        self.port = int(self.server_address[1])
        self._hosts = {f"{name}:{self.port}" for name in (*LOOPBACK_NAMES, url_host(host))}

    @property
    def url(self) -> str:
        return f"http://{url_host(self.host)}:{self.port}/"

    def host_allowed(self, value: str | None) -> bool:
        if value is None:
            return True  # an HTTP/1.0 client without Host: no browser sends that
        value = value.strip().lower()
        return value in self._hosts or value in (*LOOPBACK_NAMES, url_host(self.host))

    def respond(self, path: str) -> tuple[int, str, str | bytes]:
        o = self.options
        try:
            with self._lock:
                if path == "/":
                    html = render_index(list_receipts(o), o, lambda rid: f"/r/{rid}")
                    return 200, "text/html; charset=utf-8", html
                rid, dot, ext = path.removeprefix("/r/").partition(".")
                if (
                    not path.startswith("/r/")
                    or not RECEIPT_ID.fullmatch(rid)
                    or (dot and ext != "json")
                ):
                    return 404, "text/plain", "not found"
                try:  # only what the index lists; whatever else the file is, it is not served
                    bundle = listed_receipt(o, rid)
                except OSError as exc:
                    return 404, "text/plain", f"not found: {_message(exc)}"
                except ValueError as exc:
                    return 404, "text/plain", f"not found: {rid}.json is not a receipt ({exc})"
                if ext == "json":  # the values the ledger has forgotten hidden
                    return (
                        200,
                        "application/json",
                        pretty(redacted_bundle(bundle, erasures(o.ledger))[0]),
                    )
                return 200, "text/html; charset=utf-8", receipt_page(o, rid, "/", f"/r/{rid}.json")
        except FileNotFoundError as exc:  # gone between the check and the page
            return 404, "text/plain", _message(exc)
        except Exception as exc:  # a damaged bundle or an unreadable ledger: said, not hidden
            return 500, "text/plain", _message(exc)


def _message(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return str(exc) or type(exc).__name__


def write_review(o: ReviewOptions, out_dir: str | os.PathLike[str]) -> dict[str, int]:
    """``index.html`` and, per receipt, ``r/<id>.html`` and ``r/<id>.json``; returns
    ``{"receipts": N}``. Files are replaced by rename, never written through a link. The folder
    then holds exactly this run's pages: those the index it replaces wrote (``reviewfiles``)
    that this run does not (a receipt pruned since) are removed, and nothing else."""
    folder = Path(out_dir)
    folder.mkdir(parents=False, exist_ok=True)
    (folder / "r").mkdir(parents=False, exist_ok=True)
    reviewfiles.check_apart(folder, o.receipts_dir)  # never written over the receipts
    remove_stale(folder, pattern(re.escape("index.html"), "tmp"))  # a kill's, once stale
    remove_stale(folder / "r", pattern(r"[^/]+\.(?:html|json)", "tmp"))
    earlier = reviewfiles.earlier_pages(folder)
    run = ReviewRun(o)  # the ledger, the summaries and each receipt's verification read once
    rows = list_receipts(o, run)
    for row in rows:
        rid = row.receipt_id
        html = receipt_page(o, rid, "../index.html", f"{rid}.json", run)
        _replace(folder / "r" / f"{rid}.html", html)
        _replace(folder / "r" / f"{rid}.json", pretty(served_bundle(o, rid, run)))
    reviewfiles.remove(folder, earlier - reviewfiles.pages(r.receipt_id for r in rows))
    index = render_index(rows, o, lambda rid: f"r/{rid}.html")
    _replace(folder / "index.html", reviewfiles.marked(index))
    return {"receipts": len(rows)}


def _replace(path: Path, content: str) -> None:
    tmp = temporary(path, "tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(content)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


__all__ = ["HEADERS", "NotLoopbackError", "ReviewServer", "check_loopback", "write_review"]
