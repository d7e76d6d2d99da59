"""Where the HTTP memory server may listen, and the listening socket.

A non-loopback address is refused without a bearer token (``check_bind``): an unauthenticated
memory server on a network would let anyone read and erase it. ``allowed_host_names`` gives the
Host names the server answers to (SPEC 4.5); ``listen`` binds, so a taken port is a clear error
before anything else is opened.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence

from agent_custody_state.server.connections import DEFAULT_BACKLOG
from agent_custody_state.server.guard import LOOPBACK_NAMES

_WILDCARDS = ("0.0.0.0", "::", "")


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, *, has_tokens: bool) -> None:
    """Refuse a non-loopback address without a token (``ValueError``)."""
    if not has_tokens and not is_loopback(host):
        raise ValueError(
            f"refusing to serve on {host or '*'} without a bearer token: anyone on the network "
            "could read and erase memory; give --token-env NAME (or [[server.tokens]]), or bind "
            "127.0.0.1"
        )


def allowed_host_names(host: str, extra: Sequence[str] | None) -> list[str]:
    """Loopback names, the bind address, and ``extra``; any name (``*``) for a wildcard bind
    without ``extra``, since the names such a server is reached by cannot be known."""
    names = ["127.0.0.1", "localhost", "[::1]"]
    if host not in _WILDCARDS and host not in LOOPBACK_NAMES:
        names.append(f"[{host}]" if ":" in host else host)
    if extra:
        names.extend(extra)
    elif host in _WILDCARDS:
        names.append("*")
    return names


def listen(host: str, port: int, backlog: int = DEFAULT_BACKLOG) -> socket.socket:
    """Bind and listen, so a taken port is a clear error and port 0 is known at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that say they are
    # TCP, and without it Nagle's algorithm meets delayed ACKs: 40 ms on every call.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return sock
