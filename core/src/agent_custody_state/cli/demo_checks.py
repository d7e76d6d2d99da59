"""What ``agent-custody-memory demo`` checks along its tour, as a newcomer would by hand: the
last result's signature (with the server's public key), the ledger's hash chain after the
forget (``verify``), and the erasure certificate the forget returned (``certificate verify``).
Each prints a line marked ✓ or ✗ and never stops the tour.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_custody_state.cli.demo import Tour


def check_signature(tour: Tour) -> None:
    """Verify the last result's signature (``_meta``) with the server's public key."""
    from agent_custody_state.server.signing import verify_envelope
    from agent_custody_state.server.trust import SIGNATURE_KEY

    envelope = (tour.last.meta or {}).get(SIGNATURE_KEY) if tour.last is not None else None
    if envelope is None or tour.public_key is None:
        print("   " + tour.paint("31", "✗ the result carries no signature"))
        return
    payload = verify_envelope(envelope, tour.public_key)
    print(
        "   "
        + tour.paint("32", "✓ ")
        + f"signature verified: {payload.get('tool')} for receipt {payload.get('receiptId')}"
    )


def check_chain(ledger: str, tour: Tour) -> None:
    """Verify the ledger's hash chain after the forget (``agent-custody-memory verify``)."""
    from agent_custody_state.cli.proofs import stored
    from agent_custody_state.ledger.verify import verify_lines

    with stored(ledger) as (lines, _notes):
        report = verify_lines(lines, checkpoints=[], public_key=None)
    mark = tour.paint("32", "✓ ") if report.ok else tour.paint("31", "✗ ")
    print(
        "   "
        + mark
        + (
            "the chain verifies from genesis, forget included"
            if report.ok
            else f"the chain does not verify: {report}"
        )
    )


def check_certificate(ledger: str, path: str, tour: Tour, *, keep: bool) -> None:
    """Keep the certificate memory.forget returned and verify it as ``agent-custody-memory
    certificate verify`` does: signature, shape, and against the ledger (its path only if kept)."""
    from agent_custody_state.cli.proofs import stored
    from agent_custody_state.keys import PublicKeyRef
    from agent_custody_state.ledger.certverify import CertificateError, check_against
    from agent_custody_state.ledger.certverify import check_certificate as check

    with open(path, "w", encoding="utf-8") as fh:
        json.dump(tour.certificate, fh, indent=2)
    try:
        statement = check(tour.certificate, PublicKeyRef.of(tour.public_key))
        with stored(ledger) as (lines, _notes):
            check_against(statement, lines)
    except CertificateError as exc:
        print("   " + tour.paint("31", "✗ ") + f"the certificate does not verify: {exc}")
        return
    p = statement["predicate"]
    scan = p["verification"]["byteScan"]
    print(
        "   "
        + tour.paint("32", "✓ ")
        + f"{path if keep else 'the certificate (in the temporary folder)'}: "
        f"{p['sanitization']['category']}, outcome {p['outcome']}, "
        f"{scan.get('hits', 0)} hits in {scan.get('filesScanned', 0)} ledger files, "
        f"stores {[s['name'] + ': ' + s['verification'] for s in p['stores']['stores']]}, "
        f"chain {p['chain']['before']['size']} -> {p['chain']['after']['size']} events, "
        f"{len(p['residualWindows'])} places named that no forget reaches (residualWindows)"
    )


__all__ = ["check_certificate", "check_chain", "check_signature"]
