"""Receipt bundles as the receipts gateway writes them: finding, loading, decoding (SPEC-EXTRAS 1).

A receipts directory is flat: ``<receiptId>.json`` per tool call, ``<receiptId>.authorization.json``
for precommitted calls, and possibly other JSON files. Nothing is verified while loading (that is
``verify``). Every loader here skips ``*.authorization.json`` and files that do not parse, as the
original's review does (SPEC-EXTRAS 9.1's recommendation): the original's ``blast`` also read the
authorization bundles and aborted on a non-JSON file.

A receipt is read only from a regular file of the directory itself, of at most
``MAX_BUNDLE_BYTES``: a symbolic link is never followed (it could name any file the reader can
open, a private key say, and the review serves what it reads), and a FIFO, a device or a huge
file is refused before it is read. Such a file is one that does not parse.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_custody_state.extras.jsview import at, parse
from agent_custody_state.regularfiles import read_bounded
from agent_custody_state.signing import b64decode_lenient

AUTHORIZATION_SUFFIX = ".authorization.json"
#: A receipt id as the review pages route it (and as static page file names accept it).
RECEIPT_ID = re.compile(r"[0-9a-f-]{36}")
#: The largest receipt file read: a receipt holds one call's arguments and result, and a tool
#: result of several megabytes (an image) must still fit; a file far larger is not a receipt.
MAX_BUNDLE_BYTES = 32 * 1024 * 1024


class BundleError(ValueError):
    """A file that is not a receipt bundle."""


def bundle_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The receipt files of a directory, byte-sorted as Node lists them."""
    folder = Path(directory)
    names = sorted(os.listdir(folder), key=lambda n: os.fsencode(n))
    return [
        folder / n for n in names if n.endswith(".json") and not n.endswith(AUTHORIZATION_SUFFIX)
    ]


def read_bytes(path: Path) -> bytes:
    """A receipt file's bytes; ``BundleError`` for a symbolic link, a file that is not regular
    (a FIFO would block the reader) or one larger than ``MAX_BUNDLE_BYTES``; ``OSError`` as the
    OS says it otherwise (a missing file). (``regularfiles.read_bounded``.)"""
    try:
        return read_bounded(path, MAX_BUNDLE_BYTES, "receipts")
    except ValueError as exc:
        raise BundleError(str(exc)) from None


def read_json(path: Path) -> Any:
    """A receipt file's JSON (``read_bytes``); ``BundleError`` when it is not JSON (or is nested
    absurdly deep)."""
    data = read_bytes(path)
    try:
        return parse(data)
    except ValueError as exc:
        raise BundleError(f"not JSON ({exc})") from None


def decode_statement(bundle: Any) -> Any:
    """The statement inside a bundle's envelope (not verified); ``BundleError`` if undecodable."""
    payload = at(bundle, "envelope", "payload")
    if not isinstance(payload, str):
        raise BundleError("the bundle has no envelope payload")
    try:
        return parse(b64decode_lenient(payload))
    except ValueError as exc:
        raise BundleError(f"the envelope payload is not JSON ({exc})") from None


def predicate_of(bundle: Any) -> dict[str, Any]:
    """The statement's predicate, or ``{}``."""
    predicate = at(decode_statement(bundle), "predicate")
    return predicate if isinstance(predicate, dict) else {}


def load_bundle(directory: str | os.PathLike[str], receipt_id: str) -> Any:
    """``<dir>/<receiptId>.json``; ``OSError`` when missing, ``ValueError`` when not JSON."""
    return read_json(Path(directory) / f"{receipt_id}.json")


@dataclass(frozen=True)
class ReceiptSummary:
    """What ``blast`` needs of a receipt: when, which tool, the outcome, the facts shown."""

    receipt_id: Any
    timestamp: Any
    tool: Any
    status: Any
    consumed: list[Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "receiptId": self.receipt_id,
            "timestamp": self.timestamp,
            "tool": self.tool,
            "status": self.status,
            "consumed": list(self.consumed),
        }


def time_key(value: Any) -> str:
    """Timestamps compare as plain strings; a missing one sorts first."""
    return value if isinstance(value, str) else ""


def summarize(bundle: Any) -> ReceiptSummary | None:
    """The summary of one bundle, or ``None`` when it has no payload or no receipt id."""
    if not at(bundle, "envelope", "payload"):
        return None
    return _summary(decode_statement(bundle))


def _summary(statement: Any) -> ReceiptSummary | None:
    """``summarize`` of a bundle whose statement is already decoded."""
    predicate = at(statement, "predicate")
    receipt_id = at(predicate, "receiptId")
    if not isinstance(receipt_id, str) or not receipt_id:
        return None  # the original needs a truthy id; a non-string one would break its output
    tool = at(predicate, "tool", "name")
    status = at(predicate, "execution", "status")
    consumed = at(predicate, "consumed", "factIds")
    return ReceiptSummary(
        receipt_id=receipt_id,
        timestamp=at(predicate, "timestamp"),
        tool="?" if tool is None else tool,
        status="?" if status is None else status,
        consumed=list(consumed) if isinstance(consumed, list) else [],
    )


def _decoded(directory: str | os.PathLike[str]) -> Iterator[tuple[Any, Any]]:
    """Each receipt file of a directory that reads and decodes (``bundle_files``' order), read
    once: (bundle, statement). A file that does not is skipped."""
    for path in bundle_files(directory):
        try:
            bundle = read_json(path)
            yield bundle, decode_statement(bundle)
        except (OSError, ValueError):
            continue


def _by_time(summaries: list[ReceiptSummary]) -> list[ReceiptSummary]:
    return sorted(summaries, key=lambda s: time_key(s.timestamp))


def load_summaries(directory: str | os.PathLike[str]) -> list[ReceiptSummary]:
    """Every receipt of a directory, sorted by timestamp (stable)."""
    found = (_summary(statement) for _bundle, statement in _decoded(directory))
    return _by_time([summary for summary in found if summary is not None])


def load_bundles(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """Every bundle keyed by its predicate's receipt id; on a duplicate the later file wins."""
    return load_receipts(directory)[0]


def load_receipts(
    directory: str | os.PathLike[str],
) -> tuple[dict[str, Any], list[ReceiptSummary]]:
    """``load_bundles`` and ``load_summaries`` of a directory, each file read and decoded once
    (``pack`` needs both: it read every receipt file twice)."""
    bundles: dict[str, Any] = {}
    summaries: list[ReceiptSummary] = []
    for bundle, statement in _decoded(directory):
        summary = _summary(statement)
        if summary is not None:  # a receipt id: a non-empty text
            bundles[summary.receipt_id] = bundle
            summaries.append(summary)
    return bundles, _by_time(summaries)


def load_directory(directory: str | os.PathLike[str]) -> Path:
    """A receipts directory that exists; ``NotADirectoryError``/``FileNotFoundError`` otherwise."""
    folder = Path(directory)
    os.listdir(folder)  # raises the OS's own error, named for the path
    return folder
