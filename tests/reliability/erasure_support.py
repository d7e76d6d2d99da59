"""What the erasure tests share: the needles of erased and of kept (control) facts.

The values come from ``crash_ops.make_value``: each carries a fresh random marker, so neither
compression nor a short value can fool a scan. Kept facts are controls: their bytes must be found
by the very same scans, which proves each scan can see what it looks for.
"""

from __future__ import annotations


class Facts:
    """Markers of forgotten and of kept (control) facts, as bytes."""

    def __init__(self) -> None:
        self.erased: dict[str, list[bytes]] = {}
        self.kept: dict[str, list[bytes]] = {}

    def needles(self, which: dict[str, list[bytes]]) -> list[bytes]:
        """Every needle of ``which`` (``erased`` or ``kept``), in one list."""
        return [n for ns in which.values() for n in ns]
