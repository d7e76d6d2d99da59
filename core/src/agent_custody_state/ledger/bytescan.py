"""The byte scan of an erasure certificate: is a forgotten value still in the ledger's own files?

After a forget (and its ``compact``) the certificate reads every file the backend names as its
own (``EventBackend.local_files``, and ``KeyStore.local_files`` in crypto-shred mode) and counts
the places where the value's bytes still occur, in the forms a value takes on disk or in transit:

- ``utf-8``: the value as JSON text, as the ledger writes it (a string with its quotes), and for
  a string of at least ``MIN_RAW`` bytes its characters alone (a JSONB column, a log line);
- ``json-escaped``: that JSON text escaped once more, as it sits inside another JSON string, and
  its ASCII-only spelling (``\\uXXXX``) where that differs;
- ``base64``: the UTF-8 forms in base64, at each of the three byte alignments a value can have
  inside a longer base64 text (only the characters every alignment fixes are searched).
- ``fragment``: for a UTF-8 form longer than ``FRAGMENT_FROM`` bytes, slices of ``FRAGMENT``
  bytes every ``stride`` bytes (``fragment_stride``): a long value is not stored in one run of
  bytes (SQLite overflow pages, each led by a page pointer; PostgreSQL TOAST chunks of about
  2,000 bytes; WAL frames of those pages), so the whole value is never found while pieces of it
  remain. Any run of ``stride + FRAGMENT - 1`` bytes of the value holds a whole slice; up to
  ``MAX_FRAGMENTS`` slices per form (a longer value's stride grows). A value stored compressed
  (PostgreSQL's TOAST compression) is found in no form: the backend reports what its compaction
  left instead (``Forgetting``'s residue, docs/forget.md).

A value given as ``bytes`` (a crypto-shred data key) is searched ``raw`` (a BLOB or ``bytea``
column, a WAL record), in ``base64`` at the three alignments and in ``hex`` (PostgreSQL's text
form of ``bytea``, a dump).

A hit counts any copy of those bytes, also one belonging to another fact with the same value:
the scan can only say that the bytes are gone, never which fact a copy belongs to, so a hit is
reported as such and never explained away. Short values are searched only with their quotes
(``"pro"``), or every ``provenance`` would count; a number, boolean or other value that is not
a string and whose JSON text is shorter than ``MIN_RAW`` bytes (``1``, ``true``, ``[2]``) has no
quotes to carry it, so it is searched ``keyed``, as the ledger writes it between its key and
the next (``"value":1,``, and that escaped once more), or every ``1`` of every timestamp would
count. A
``null`` value is not searched: the forget writes ``null`` in its place.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_custody_state.canonical import js_json

#: A string shorter than this (in UTF-8 bytes) is searched only as quoted JSON.
MIN_RAW = 8
#: A UTF-8 form longer than this is also searched by its slices (``fragment``).
FRAGMENT_FROM = 256
#: The length of a slice.
FRAGMENT = 128
#: The smallest distance between two slices' starts, and the most slices searched per form
#: (few: a copy left behind is the whole value, in pages or chunks, so slices far apart find
#: it, and each slice is one more search of every file).
MIN_STRIDE = 256
MAX_FRAGMENTS = 16
#: Bytes read at a time: files of any size are scanned in constant memory.
CHUNK = 1 << 20


@dataclass(frozen=True)
class Needle:
    """One form of a value: its name (``utf-8``, ``json-escaped``, ``base64``) and bytes."""

    form: str
    data: bytes


def _base64_forms(data: bytes) -> list[bytes]:
    """The base64 characters ``data`` fixes at each alignment inside a longer encoded text."""
    forms = []
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + data)
        start = 4 if pad else 0  # the first group mixes the unknown bytes before it
        end = 4 * ((pad + len(data)) // 3)  # a partial last group depends on what follows
        if end - start >= 4:
            forms.append(encoded[start:end])
    return forms


def fragment_stride(size: int) -> int:
    """The distance between the starts of two slices of a form of ``size`` bytes."""
    return max(MIN_STRIDE, -(-(size - FRAGMENT) // (MAX_FRAGMENTS - 1)))


def _fragments(data: bytes) -> list[bytes]:
    """The slices of a long form (none for a short one), the last one ending with it."""
    if len(data) <= FRAGMENT_FROM:
        return []
    stride = fragment_stride(len(data))
    starts = [*range(0, len(data) - FRAGMENT, stride), len(data) - FRAGMENT]
    return [data[s : s + FRAGMENT] for s in dict.fromkeys(starts)]


def _key_needles(data: bytes) -> list[Needle]:
    """The forms of raw bytes (a key): as stored, in base64, in hex."""
    found = [Needle("raw", data), *(Needle("base64", b) for b in _base64_forms(data))]
    return [*found, Needle("hex", data.hex().encode("ascii"))]


def _escaped(text: str, form: str) -> list[Needle]:
    """``text`` escaped once more, as it sits inside another JSON string."""
    return [Needle(form, js_json(text)[1:-1].encode("utf-8"))]


def needles(value: Any) -> list[Needle]:
    """The forms of ``value`` the scan looks for (deduplicated, in a stable order)."""
    if isinstance(value, bytes):
        return _key_needles(value)
    as_json = js_json(value)
    if value is None:
        return []  # the forget leaves ``"value":null``: nothing of the value to look for
    if not isinstance(value, str) and len(as_json.encode("utf-8")) < MIN_RAW:
        keyed = js_json({"value": value})[1:-1] + ","  # a key follows: ``1`` is not ``12``
        return [Needle("keyed", keyed.encode("utf-8")), *_escaped(keyed, "keyed")]
    utf8 = [as_json.encode("utf-8")]
    if isinstance(value, str) and len(value.encode("utf-8")) >= MIN_RAW:
        utf8.append(value.encode("utf-8"))
    escaped = js_json(as_json)[1:-1]
    found: list[Needle] = [Needle("utf-8", d) for d in utf8]
    found.append(Needle("json-escaped", escaped.encode("utf-8")))
    found.append(Needle("json-escaped", json.dumps(as_json)[1:-1].encode("ascii")))
    found.append(Needle("json-escaped", json.dumps(value, ensure_ascii=True).encode("ascii")))
    found += [Needle("base64", b) for d in utf8 for b in _base64_forms(d)]
    found += [Needle("fragment", b) for d in utf8 for b in _fragments(d)]
    unique: dict[bytes, Needle] = {}
    for needle in found:
        unique.setdefault(needle.data, needle)
    return list(unique.values())


@dataclass
class FileScan:
    """One file: its size and the hits in it (``error`` when it could not be read)."""

    path: str
    size: int = 0
    hits: int = 0
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": self.path, "bytes": self.size, "hits": self.hits}
        if self.error is not None:
            data = {"path": self.path, "error": self.error}
        return data


@dataclass
class ScanResult:
    """What one value's scan found: every file read, and the hits in all of them."""

    forms: list[str] = field(default_factory=list)
    files: list[FileScan] = field(default_factory=list)

    @property
    def hits(self) -> int:
        return sum(f.hits for f in self.files)

    @property
    def complete(self) -> bool:
        """Every file named could be read."""
        return all(f.error is None for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "forms": self.forms,
            "files": [f.to_dict() for f in self.files],
            "filesScanned": sum(1 for f in self.files if f.error is None),
            "hits": self.hits,
        }


def _count(buffer: bytes, needle: bytes, fresh_from: int) -> int:
    """Occurrences of ``needle`` in ``buffer`` that end at or after ``fresh_from`` (those
    ending before it were counted with the previous chunk)."""
    count, at = 0, buffer.find(needle)
    while at != -1:
        if at + len(needle) > fresh_from:
            count += 1
        at = buffer.find(needle, at + 1)
    return count


def scan_files(
    paths: Iterable[str],
    values: Mapping[str, Any],
    secrets: Mapping[str, Iterable[bytes]] | None = None,
) -> dict[str, ScanResult]:
    """Scan each existing file of ``paths`` once for every value of ``values`` (keyed by, say,
    fact id), and for the raw ``secrets`` of the same key (its crypto-shred data keys: a hit of
    either counts); a path that does not exist is skipped, one that cannot be read is recorded.
    Each file is named, and scanned once, by its own name (every symlink resolved): one file
    listed under two spellings was counted twice, and a symlink's name is not the file's."""
    forms = {key: needles(value) for key, value in values.items()}
    for key, raw in (secrets or {}).items():
        forms[key] = [*forms.get(key, []), *(n for data in raw for n in needles(bytes(data)))]
    results = {
        key: ScanResult(forms=sorted({n.form for n in found})) for key, found in forms.items()
    }
    longest = max((len(n.data) for found in forms.values() for n in found), default=1)
    for path in dict.fromkeys(os.path.realpath(p) for p in paths):
        if not os.path.isfile(path):
            continue
        counts = dict.fromkeys(forms, 0)
        size, error = 0, None
        try:
            with open(path, "rb") as fh:
                tail = b""
                while chunk := fh.read(CHUNK):
                    size += len(chunk)
                    buffer = tail + chunk
                    for key, found in forms.items():
                        counts[key] += sum(_count(buffer, n.data, len(tail)) for n in found)
                    tail = buffer[-(longest - 1) :] if longest > 1 else b""
        except OSError as exc:
            error = exc.strerror or str(exc)
        for key, result in results.items():
            scanned = FileScan(path, size, counts[key], error)
            result.files.append(scanned)
    return results
