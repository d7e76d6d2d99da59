"""A mistyped ``AGENT_CUSTODY_*`` variable is named, not ignored.

pydantic-settings reads the variables that spell a setting and ignores every other one, so
the prefix plus ``FORGET_MODES=crypto-shred`` started a server in plain mode without a word (an
unknown key under a table, the prefix plus ``SERVER__PROT``, is already refused by the table's
model). ``near_misses`` finds the variables that are not a setting but are spelt almost like
one; the config loader refuses them as it refuses an unknown key in the file. A variable that
resembles no setting (a test suite's own knob, another tool's) is left alone.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping

#: Variables under the prefix that are read outside the settings (plugin loading, the JSONL
#: size limit, the conformance suite's and this repository's test knobs): never a near miss.
READ_ELSEWHERE = frozenset(
    {"PLUGINS", "BLOCK_PLUGINS", "JSONL_MAX_MB", "PROPERTY_EXAMPLES", "STRESS", "SEED"}
)
#: How alike a name must be to a setting's to be taken for a typo of it (difflib's ratio):
#: ``FORGET_MODES``/``FORGET_MODE`` 0.96, ``LEDGR``/``LEDGER`` 0.91, ``KEYS``/``KEY`` 0.86.
CUTOFF = 0.85


def near_misses(
    prefix: str, settings: Iterable[str], environ: Mapping[str, str] | None = None
) -> list[tuple[str, str]]:
    """``(variable, the setting's variable it resembles)`` for each variable under ``prefix``
    (top level only: no ``__``) that sets nothing but is spelt almost like a setting's."""
    known = {name.upper() for name in settings} | READ_ELSEWHERE
    found = []
    for variable in sorted(os.environ if environ is None else environ):
        name = variable[len(prefix) :].upper()
        if not variable.upper().startswith(prefix) or "__" in name or name in known:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=CUTOFF)
        if close:
            found.append((variable, prefix + close[0]))
    return found
