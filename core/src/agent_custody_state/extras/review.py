"""``review``: the receipts as web pages, for people who will not open a terminal (SPEC-EXTRAS 5).

An index of every receipt in a directory (newest first, with its verdict when keys are given) and
one page per receipt with the ten answers of ``explain``, the verification report and a link to
the bundle as issued. Pages are self-contained HTML5: inline styles only, no scripts, nothing
fetched from elsewhere, and a content security policy that forbids all of it. This module builds
the pages; ``review_server`` serves them on loopback or writes them as static files.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_custody_state.extras.blast import Shown
from agent_custody_state.extras.bundles import (
    RECEIPT_ID,
    BundleError,
    bundle_files,
    decode_statement,
    load_summaries,
    read_json,
    time_key,
)
from agent_custody_state.extras.erased import (
    Erasures,
    erasures,
    redacted_bundle,
    snapshot_erasures,
)
from agent_custody_state.extras.explain import LABEL_WIDTH, build_action_pack, format_explain
from agent_custody_state.extras.jsview import at, compact, text
from agent_custody_state.extras.ledgerview import Snapshot, fresh
from agent_custody_state.extras.verify import VerifyOptions, VerifyResult, verify_bundle
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.signing import well_formed

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})
_LABEL = re.compile(r"^[A-Z][A-Z ?]+$")


def esc(value: Any) -> str:
    """Escape ``& < > "`` (every attribute here is double-quoted)."""
    return text(value).translate(_ESCAPES)


@dataclass
class ReviewOptions:
    receipts_dir: str
    ledger: Ledger | None = None
    keys: VerifyOptions | None = None
    title: str | None = None

    @property
    def heading(self) -> str:
        return self.title if self.title is not None else "Receipts"


@dataclass
class ReceiptRow:
    receipt_id: str
    timestamp: Any
    tool: Any
    status: Any
    agent: Any
    principal: Any
    issuer: Any
    verified: bool | None = None


def verification(bundle: Any, o: ReviewOptions) -> VerifyResult | None:
    return verify_bundle(bundle, o.keys) if o.keys is not None else None


def fingerprint(bundle: Any) -> bytes:
    """Equal for bundles of equal JSON, keys in the same order (what verification reads)."""
    return hashlib.sha256(compact(bundle).encode("utf-8", "surrogatepass")).digest()


def listed_bundle(path: Path) -> tuple[Any, Any]:
    """``(bundle, predicate)`` of a receipts file the review lists; ``OSError`` or ``ValueError``
    saying why it does not. Listed is: a regular file (never a link) of bounded size that is a
    bundle whose statement names a tool, an execution, an agent, a principal and an issuer, under
    an id of 36 characters of ``[0-9a-f-]`` (the page's address, and its file name when written),
    stored as ``<receiptId>.json`` (where a page looks it up)."""
    bundle = read_json(path)
    p = at(decode_statement(bundle), "predicate")
    parts = [at(p, k) for k in ("tool", "execution", "agent", "principal", "issuer")]
    receipt_id = at(p, "receiptId")
    if not all(isinstance(x, dict) for x in parts) or not isinstance(receipt_id, str):
        raise BundleError("not a receipt: its statement lacks a receipt id or a part")
    if not RECEIPT_ID.fullmatch(receipt_id) or path.name != f"{receipt_id}.json":
        raise BundleError("not a receipt the review lists: stored under another name")
    return bundle, p


def listed_receipt(o: ReviewOptions, receipt_id: str) -> Any:
    """The bundle of ``receipt_id`` if the index lists it (``listed_bundle``), else
    ``FileNotFoundError``/``ValueError``: what the server and the static pages serve."""
    if not RECEIPT_ID.fullmatch(receipt_id):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), f"{receipt_id}.json")
    return listed_bundle(Path(o.receipts_dir) / f"{receipt_id}.json")[0]


def list_receipts(o: ReviewOptions, run: ReviewRun | None = None) -> list[ReceiptRow]:
    """Every receipt of the directory the review lists (``listed_bundle``), newest first;
    ``run``: the run that builds their pages, which keeps what the listing verified
    (``ReviewRun.listed``)."""
    rows: list[ReceiptRow] = []
    for path in bundle_files(o.receipts_dir):
        try:
            bundle, p = listed_bundle(path)
        except (OSError, ValueError):
            continue
        result = verification(bundle, o) if run is None else run.listed(bundle, p)
        rows.append(
            ReceiptRow(
                receipt_id=at(p, "receiptId"),
                timestamp=at(p, "timestamp"),
                tool=at(p, "tool", "name"),
                status=at(p, "execution", "status"),
                agent=at(p, "agent", "id"),
                principal=at(p, "principal", "id"),
                issuer=at(p, "issuer", "kind"),
                verified=None if result is None else result.ok,
            )
        )
    return sorted(rows, key=lambda r: time_key(r.timestamp), reverse=True)


_STYLE = """
:root{color-scheme:light dark;--fg:#1d2329;--dim:#5f6b76;--rule:#d9dee3;--card:#fff;
--page:#f6f7f9;--good:#146c43;--bad:#a4161a;--link:#1f5fa8}
@media (prefers-color-scheme:dark){:root{--fg:#e8ecef;--dim:#a3afba;--rule:#2c353d;
--card:#161c21;--page:#0f1418;--good:#63c98f;--bad:#ff8f8f;--link:#8ab8f0}}
*{box-sizing:border-box}
body{margin:0;background:var(--page);color:var(--fg);font:15px/1.55 system-ui,sans-serif}
main{max-width:72rem;margin:0 auto;padding:1.5rem 1rem 3rem}
h1{font-size:1.35rem;margin:.2rem 0}h2{font-size:1.05rem;margin:1.6rem 0 .5rem}
a{color:var(--link)}p.lede{color:var(--dim);margin:.2rem 0 1rem}
.scroll{overflow-x:auto;background:var(--card);border:1px solid var(--rule);border-radius:6px}
table{border-collapse:collapse;width:100%;font-size:.92rem}
th,td{padding:.45rem .65rem;border-bottom:1px solid var(--rule);text-align:left;
white-space:nowrap;vertical-align:top}
th{font-weight:600;color:var(--dim);font-size:.8rem;text-transform:uppercase}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.9em}
pre{background:var(--card);border:1px solid var(--rule);border-radius:6px;padding:.8rem 1rem;
white-space:pre-wrap;overflow-x:auto}
dl{display:grid;grid-template-columns:minmax(12rem,max-content) 1fr;gap:.4rem 1.2rem;margin:0;
background:var(--card);border:1px solid var(--rule);border-radius:6px;padding:1rem}
dt{font-weight:600;font-size:.8rem;color:var(--dim);padding-top:.15rem}
dd{margin:0;white-space:pre-wrap;overflow-wrap:anywhere}
.ok{color:var(--good);font-weight:600}.bad{color:var(--bad);font-weight:600}.muted{color:var(--dim)}
@media (max-width:42rem){dl{grid-template-columns:1fr}}
"""


def page(title: str, body: str) -> str:
    return well_formed(
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta http-equiv="content-security-policy" content="{esc(CSP)}">\n'
        f"<title>{esc(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        f"<main>{body}</main>\n</body>\n</html>\n"
    )


def verdict(ok: bool | None) -> str:
    if ok is None:
        return '<span class="muted">not checked</span>'
    return '<span class="ok">verified</span>' if ok else '<span class="bad">NOT VERIFIED</span>'


def _when(timestamp: Any) -> str:
    return esc(text(timestamp).replace("T", " ", 1)[:19])


def render_index(rows: list[ReceiptRow], o: ReviewOptions, link: Callable[[str], str]) -> str:
    checked = (
        ", each checked against the keys given"
        if o.keys is not None
        else ", not checked: start the review with the gateway's and principal's public keys to verify"
    )
    beliefs = (
        "; beliefs from the ledger"
        if o.ledger is not None
        else "; no ledger, so what depended on a call is not known here"
    )
    body_rows = "\n".join(
        f"<tr><td>{_when(r.timestamp)}</td><td><code>{esc(r.tool)}</code></td>"
        f"<td>{esc(r.status)}</td><td>{esc(r.agent)}</td>"
        f"<td>{'' if r.principal is None else esc(r.principal)}</td><td>{esc(r.issuer)}</td>"
        f"<td>{verdict(r.verified)}</td>"
        f'<td><a class="mono" href="{esc(link(r.receipt_id))}">{esc(r.receipt_id[:8])}</a></td></tr>'
        for r in rows
    )
    body = (
        f"\n<h1>{esc(o.heading)}</h1>\n"
        f'<p class="lede">{len(rows)} receipt(s) in {esc(o.receipts_dir)}{esc(checked)}{esc(beliefs)}.</p>\n'
        '<div class="scroll"><table><thead><tr><th>when</th><th>tool</th><th>outcome</th>'
        "<th>agent</th><th>principal</th><th>producer</th><th>verification</th><th>receipt</th>"
        f"</tr></thead><tbody>\n{body_rows}\n</tbody></table></div>\n"
        '<p class="muted">Producer "gateway": the call passed through the receipts gateway, '
        'outside the agent. Producer "sdk": the agent\'s own process reported it. Anyone holding '
        "the same public keys can repeat the verification offline.</p>"
    )
    return page(o.heading, body)


def explain_html(explained: str) -> str:
    """The ten answers as a definition list; continuation lines stay with their answer."""
    items: list[tuple[str, list[str]]] = []
    for line in explained.split("\n"):
        label = line[:LABEL_WIDTH].strip()
        answer = line[LABEL_WIDTH:].rstrip()
        if label and _LABEL.match(label):
            items.append((label, [answer]))
        elif items:
            items[-1][1].append(answer)
    return (
        "<dl>"
        + "".join(f"<dt>{esc(q)}</dt><dd>{esc(chr(10).join(a))}</dd>" for q, a in items)
        + "</dl>"
    )


def render_receipt(
    pack: dict[str, Any],
    result: VerifyResult | None,
    o: ReviewOptions,
    back: str,
    raw: str,
    erased: Erasures | None = None,
    hidden: int | None = None,
) -> str:
    """A receipt's page; ``erased``: the ledger's forgotten facts, whose values the page and the
    raw link's JSON hide (``extras.erased``); ``hidden``: how many values the raw link's JSON
    hides, when the caller redacted it already (``redacted_bundle``)."""
    p = at(decode_statement(pack["receipt"]), "predicate")
    if result is None:
        report = "Not checked: start the review with --issuer-key and --principal-key to verify every receipt here."
    else:
        lines = "\n".join(c.line() for c in result.checks)
        report = f"{lines}\n\nRESULT: {'VERIFIED' if result.ok else 'NOT VERIFIED'}"
    if hidden is None:
        hidden = redacted_bundle(pack["receipt"], erased)[1]
    receipt_id = text(at(p, "receiptId"))
    tool = text(at(p, "tool", "name"))
    body = (
        f'\n<p><a href="{esc(back)}">All receipts</a></p>\n'
        f'<h1>{esc(tool)} <span class="muted">{esc(at(p, "execution", "status"))}</span></h1>\n'
        f'<p class="lede">{_when(at(p, "timestamp"))} · receipt <span class="mono">{esc(receipt_id)}</span>'
        f" · {verdict(None if result is None else result.ok)}</p>\n"
        "<h2>What this action is</h2>\n"
        f"{explain_html(format_explain(pack, result, o.ledger is not None, erased))}\n"
        f"<h2>Verification</h2>\n<pre>{esc(report)}</pre>\n"
        "<h2>The receipt</h2>\n"
        f"{_raw_link(raw, hidden > 0)}"
    )
    return page(f"{tool} · {receipt_id[:8]}", body)


def _raw_link(raw: str, hidden: bool) -> str:
    if not hidden:
        return (
            f'<p><a href="{esc(raw)}">The bundle as issued</a>: check it yourself with '
            "<code>agent-custody verify</code> and the public keys.</p>"
        )
    return (
        f'<p><a href="{esc(raw)}">The bundle with its erased values hidden</a>: values the '
        'ledger has forgotten read <code>{"erased": true, ...}</code>, so its signatures do not '
        "verify over it. The gateway's receipt file still holds the values, as issued, until "
        "the gateway's <code>prune</code> deletes it.</p>"
    )


class ReviewRun:
    """What building many pages reads once (``review --out``): the receipts' summaries, and the
    ledger's snapshot, renewed whenever the ledger holds other events than it was read from
    (``ledgerview.fresh``: a forget committed during the run is hidden from the next page on,
    as it is from the page being built when it lands before its erasures are read). Before,
    each page read the whole ledger several times (its pack, each written fact's blast radius,
    its erasures, and again for its ``.json``) and every receipt file (the summaries): a run
    cost receipts x (events + receipts). A run made for one page (the server's) reads the
    ledger for that page alone.

    A receipt is verified once per run: the listing keeps each receipt's result with the
    fingerprint of the bundle it verified (``listed``), and its page reuses the result when the
    bundle its pack read is that bundle (verification reads nothing but the bundle). The page's
    ``.json`` is the bundle the page redacted, while the ledger's erasures are the ones the page
    hid (checked again before the ``.json`` is written: a forget committed after the page is
    hidden from its ``.json`` too), else the receipt file read and redacted anew."""

    def __init__(self, o: ReviewOptions) -> None:
        self.options = o
        self.known: Snapshot | None = None
        self._shown: Shown | None = None
        self._listed: dict[str, tuple[bytes, VerifyResult | None]] = {}
        self._page: tuple[str, Erasures | None, Any] | None = None

    def listed(self, bundle: Any, predicate: Any) -> VerifyResult | None:
        """``verification`` of a listed bundle, kept for its page by its receipt id (without
        the decoded statement, which a page does not read: a run holds a result per receipt)."""
        result = verification(bundle, self.options)
        kept = None if result is None else VerifyResult(result.ok, result.checks)
        self._listed[at(predicate, "receiptId")] = (fingerprint(bundle), kept)
        return result

    def verified(self, receipt_id: str, bundle: Any) -> tuple[bool, VerifyResult | None]:
        """Whether ``bundle`` is the one the listing read as ``receipt_id``, and its
        verification: the listing's result if so, else verified now."""
        kept = self._listed.get(receipt_id)
        if kept is not None and kept[0] == fingerprint(bundle):
            return True, kept[1]
        return False, verification(bundle, self.options)

    def page(self, receipt_id: str, back: str, raw: str) -> str:
        """``receipt_page``, keeping the redacted bundle for its ``.json`` (``served``)."""
        o = self.options
        pack = self.pack(receipt_id)
        erased = self.erased()  # after the pack: a forget meanwhile is hidden too
        listed, result = self.verified(receipt_id, pack["receipt"])
        redacted, hidden = redacted_bundle(pack["receipt"], erased)
        self._page = (receipt_id, erased, redacted) if listed else None
        return render_receipt(pack, result, o, back, raw, erased, hidden)

    def served(self, receipt_id: str) -> Any:
        """``served_bundle``: the erasures read again; the page's redacted bundle while they
        are the ones it hid, else the listed receipt read and redacted now."""
        found = self.erased()
        page = self._page
        if page is not None and page[0] == receipt_id and page[1] is found:
            return page[2]
        return redacted_bundle(listed_receipt(self.options, receipt_id), found)[0]

    def shown(self) -> Shown:
        if self._shown is None:
            self._shown = Shown(load_summaries(self.options.receipts_dir))
        return self._shown

    def _refresh(self, ledger: Ledger) -> Snapshot:
        with ledger.backend.reading():
            self.known = fresh(ledger, self.known)
        return self.known

    def pack(self, receipt_id: str) -> dict[str, Any]:
        o = self.options
        if o.ledger is None:
            return build_action_pack(o.receipts_dir, receipt_id, bundles=False)
        known = self._refresh(o.ledger)
        return build_action_pack(
            o.receipts_dir, receipt_id, o.ledger, known, self.shown(), bundles=False
        )

    def erased(self) -> Erasures | None:
        """The ledger's forgotten facts now (``erased.erasures``), from the snapshot while the
        ledger is unchanged."""
        ledger = self.options.ledger
        if ledger is None or self.known is None:
            return erasures(ledger)
        return snapshot_erasures(self._refresh(ledger))


def receipt_page(
    o: ReviewOptions, receipt_id: str, back: str, raw: str, run: ReviewRun | None = None
) -> str:
    return (run if run is not None else ReviewRun(o)).page(receipt_id, back, raw)


def served_bundle(o: ReviewOptions, receipt_id: str, run: ReviewRun | None = None) -> Any:
    """The bundle ``/r/<id>.json`` and ``r/<id>.json`` hold: the listed receipt
    (``listed_receipt``) with the values the ledger has forgotten hidden (``redacted_bundle``)."""
    if run is not None:
        return run.served(receipt_id)
    return redacted_bundle(listed_receipt(o, receipt_id), erasures(o.ledger))[0]
