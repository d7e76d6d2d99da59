"""MCP resources: a fact, a subject's timeline and the ledger's head, read-only views.

- ``memory://fact/{factId}``: the fact in any state, its state name, whether it is held, and
  every event about it (``Ledger.get``, ``status`` and ``history``);
- ``memory://subject/{subject}``: the subject's timeline on both time axes: every fact about it
  with ``validFrom``/``validTo`` (valid time) and every event in append order with its
  ``txTime`` (transaction time) (``Ledger.timeline``);
- ``memory://ledger/head``: the event count, the spaces and, when the ledger keeps a hash chain
  (``Ledger.chain_head``), its head.

The first two are also resource templates. ``resources/list`` is paged (an opaque cursor: a
place that forgetting does not shift): the head first, then one resource per subject (one whose
facts are all forgotten is not offered, as completions do not offer it). An unknown fact or
subject is an ``INVALID_PARAMS`` error, as the current spec asks for a missing resource. Every
ledger read runs on the service's worker thread.

A space-scoped caller (``scopes.py``) sees only its spaces: a fact elsewhere is a missing
resource, a subject shows only its facts in scope (none: missing), events about unseen facts are
left out, an assert superseding an unseen fact shows as superseding none, and the head (whose
counts and spaces describe the whole ledger) is neither listed nor readable. Claimed
(quarantined) facts are shown, with their provenance: a resource is an audit view, as
``memory.get`` and ``memory.history`` are (docs/decisions.md). Who may read resources at all is
decided in ``app.py`` (the gateway requirement).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from agent_custody_state.canonical import js_json
from agent_custody_state.ledger.chain import public_fact
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.server.scopes import SpaceScope, allows, shown_events, visible_facts

FACT_PREFIX = "memory://fact/"
SUBJECT_PREFIX = "memory://subject/"
HEAD_URI = "memory://ledger/head"
PAGE_SIZE = 50
_JSON = "application/json"

TEMPLATES = types.ListResourceTemplatesResult(
    resource_templates=[
        types.ResourceTemplate(
            name="fact",
            title="A fact with its history",
            uri_template=FACT_PREFIX + "{factId}",
            description="One fact in any state, its state, its legal hold and every event about "
            "it, oldest first.",
            mime_type=_JSON,
        ),
        types.ResourceTemplate(
            name="subject",
            title="A subject's timeline",
            uri_template=SUBJECT_PREFIX + "{subject}",
            description="Every fact about a subject with its valid time, and every event about "
            "them in the order the ledger learned them (transaction time).",
            mime_type=_JSON,
        ),
    ]
)


def fact_uri(fact_id: str) -> str:
    return FACT_PREFIX + quote(fact_id, safe="")


def subject_uri(subject: str) -> str:
    return SUBJECT_PREFIX + quote(subject, safe="")


def canonical_uri(uri: str) -> str:
    """The spelling notifications use for the resource ``uri`` names: a fact or subject URI
    however escaped (raw, lower-case hex, over-escaped) resolves as ``read_resource`` resolves
    it; any other URI as written."""
    for prefix in (FACT_PREFIX, SUBJECT_PREFIX):
        if uri.startswith(prefix) and len(uri) > len(prefix):
            return prefix + quote(unquote(uri[len(prefix) :]), safe="")
    return uri


def _not_found(uri: str) -> MCPError:
    return MCPError(INVALID_PARAMS, f"Resource not found: {uri}", {"uri": uri})


def read_fact(
    ledger: Ledger, fact_id: str, spaces: SpaceScope | None = None
) -> dict[str, Any] | None:
    fact = ledger.get(fact_id)
    status = ledger.status(fact_id)
    if fact is None or status is None or not allows(spaces, fact.space):
        return None
    state, held = status
    return {
        "fact": public_fact(fact.to_dict()),
        "state": state,
        "held": held,
        "events": shown_events(ledger, spaces, ledger.history(fact_id)),
    }


def read_subject(
    ledger: Ledger, subject: str, spaces: SpaceScope | None = None
) -> dict[str, Any] | None:
    timeline = ledger.timeline(subject)
    facts = visible_facts(spaces, timeline.facts)
    if not facts:
        return None
    seen = {f.fact_id for f in facts}
    return {
        "subject": subject,
        "facts": [{**public_fact(f.to_dict()), "state": timeline.states[f.fact_id]} for f in facts],
        "held": [fact_id for fact_id in timeline.held if fact_id in seen],
        "events": shown_events(ledger, spaces, timeline.events),
    }


def read_head(ledger: Ledger) -> dict[str, Any]:
    head: dict[str, Any] = {"events": ledger.count(), "spaces": ledger.spaces()}
    chain = ledger.chain_head()
    head["chainHead"] = {"seq": chain.seq, "hash": chain.hash, "chained": chain.chained}
    return head


def read_resource(
    ledger: Ledger, uri: str, spaces: SpaceScope | None = None
) -> types.ReadResourceResult:
    """The JSON of the resource at ``uri`` as a caller limited to ``spaces`` sees it (runs on
    the worker thread)."""
    data: dict[str, Any] | None
    if uri == HEAD_URI:
        data = read_head(ledger) if spaces is None else None
    elif uri.startswith(FACT_PREFIX) and len(uri) > len(FACT_PREFIX):
        data = read_fact(ledger, unquote(uri[len(FACT_PREFIX) :]), spaces)
    elif uri.startswith(SUBJECT_PREFIX) and len(uri) > len(SUBJECT_PREFIX):
        data = read_subject(ledger, unquote(uri[len(SUBJECT_PREFIX) :]), spaces)
    else:
        data = None
    if data is None:
        raise _not_found(uri)
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=uri, mime_type=_JSON, text=js_json(data))]
    )


def subjects(ledger: Ledger, spaces: SpaceScope | None = None) -> list[str]:
    """Every subject with a fact not forgotten (in ``spaces``), in first-asserted order: as
    completions do, a listing never offers the subject of forgotten facts alone (a subject may
    itself be personal data)."""
    facts = visible_facts(spaces, ledger.facts())
    return list(dict.fromkeys(fact.subject for fact in facts if fact.forgotten is None))


def _start(cursor: str | None) -> int:
    """Where a page begins: a cursor this server gave (ASCII digits), or the start."""
    if not cursor:
        return 0
    if len(cursor) > 18 or not (cursor.isascii() and cursor.isdigit()):
        raise MCPError(INVALID_PARAMS, f"invalid cursor {cursor[:40]!r}")
    return int(cursor)


def list_page(
    ledger: Ledger, cursor: str | None, spaces: SpaceScope | None = None
) -> types.ListResourcesResult:
    """One page of ``resources/list``: the head (unscoped callers only), then the subjects.

    The cursor is a place in the order of every subject's first fact (in ``spaces``), forgotten
    subjects included though not offered: forgetting a subject does not shift the subjects after
    it, so a client forgetting what it lists page by page skips none (an offset into the offered
    list skipped one subject per subject forgotten before the next page). The head is place 0.
    """
    start = _start(cursor)
    head = types.Resource(
        name="ledger-head",
        title="The ledger's head",
        uri=HEAD_URI,
        mime_type=_JSON,
        description="Event count, spaces and (with a hash chain) the chain head.",
    )
    offered: dict[str, bool] = {}
    for fact in visible_facts(spaces, ledger.facts()):
        offered[fact.subject] = offered.get(fact.subject, False) or fact.forgotten is None
    every = [(0, head)] if spaces is None else []
    every += [
        (
            place,
            types.Resource(
                name=f"subject {subject}",
                uri=subject_uri(subject),
                mime_type=_JSON,
                description=f"The timeline of {subject}",
            ),
        )
        for place, (subject, shown) in enumerate(offered.items(), start=1)
        if shown and place >= start
    ]
    page = [(place, resource) for place, resource in every if place >= start][: PAGE_SIZE + 1]
    more = len(page) > PAGE_SIZE
    page = page[:PAGE_SIZE]
    return types.ListResourcesResult(
        resources=[resource for _, resource in page],
        next_cursor=str(page[-1][0] + 1) if more else None,
    )
