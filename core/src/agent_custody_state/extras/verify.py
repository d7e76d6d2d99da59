"""``verifyBundle``: the receipts gateway's own checks of one receipt bundle (SPEC-EXTRAS 1.6).

The same check names, order, details and stopping points as the original, so a report printed
here reads exactly as ``agent-custody verify`` prints it. Only public keys are needed. Checks of
provider deliveries (Stripe, GitHub shared secrets) are not implemented: none of the extras
passes provider secrets, and the original runs that check only when given them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agent_custody_state.extras.jsview import MISSING, at, has, text, truthy
from agent_custody_state.extras.merkle import envelope_leaf_hash, verify_inclusion
from agent_custody_state.extras.signed import verify_envelope
from agent_custody_state.signing import IN_TOTO_TYPE, PublicKeyRef, digest_of

RECEIPT_PREDICATE_TYPE = "https://agent-custody.dev/receipt/v0.2"
AUTHORIZATION_PREDICATE_TYPE = "https://agent-custody.dev/authorization/v0.1"
TREEHEAD_TYPE = "application/vnd.agent-custody.treehead+json"
DELEGATION_TYPE = "application/vnd.agent-custody.delegation+json"
UPSTREAM_TYPE = "application/vnd.agent-custody.upstream+json"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "ok": self.ok}
        if self.detail is not None:
            out["detail"] = self.detail
        return out

    def line(self) -> str:
        """``PASS  <name>`` or ``FAIL  <name>``, plus ``  (<detail>)``."""
        return f"{'PASS' if self.ok else 'FAIL'}  {self.name}" + (
            f"  ({self.detail})" if self.detail else ""
        )


@dataclass
class VerifyResult:
    ok: bool
    checks: list[Check]
    statement: Any = None

    def failed_names(self) -> str:
        return ", ".join(c.name for c in self.checks if not c.ok)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": [c.to_dict() for c in self.checks],
            "statement": self.statement,
        }


@dataclass(frozen=True)
class VerifyOptions:
    issuer_keys: list[PublicKeyRef]
    principal_keys: list[PublicKeyRef] = field(default_factory=list)
    log_keys: list[PublicKeyRef] | None = None
    upstream_keys: list[PublicKeyRef] | None = None
    log_id: str | None = None


class _Checks:
    def __init__(self) -> None:
        self.checks: list[Check] = []

    def add(self, name: str, ok: bool, detail: str | None = None) -> bool:
        self.checks.append(Check(name, bool(ok), detail))
        return bool(ok)

    def done(self, statement: Any) -> VerifyResult:
        return VerifyResult(all(c.ok for c in self.checks), self.checks, statement)


def _instant(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


_GRANT_TEXT = ("version", "principal", "agent", "issuedAt", "expiresAt")
#: A grant's time as the original's schema takes it (an ISO datetime in UTC with ``Z``, seconds
#: and any fraction): ``fromisoformat`` alone also takes a space for ``T``, the basic format
#: (``20260901T000000Z``) and no seconds.
_GRANT_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z", re.ASCII)


def verify_delegation(envelope: Any, principal_keys: list[PublicKeyRef]) -> tuple[Any, str, str]:
    """``(grant payload or None, keyid, error)`` for a signed delegation grant (SPEC-EXTRAS 1.5)."""
    kind = at(envelope, "payloadType")
    if kind != DELEGATION_TYPE:
        return None, "", f"unexpected payloadType {text(MISSING if kind is None else kind)}"
    result = verify_envelope(envelope, principal_keys)
    if not result.ok:
        return None, "", result.error
    grant = result.payload
    problems = []
    if not isinstance(grant, dict):
        problems.append("(root): expected object")
        grant = {}
    if grant.get("version") != "0.1":
        problems.append('version: expected "0.1"')
    for key in _GRANT_TEXT[1:3]:
        if not isinstance(grant.get(key), str) or not grant[key]:
            problems.append(f"{key}: expected a non-empty string")
    scopes = grant.get("scopes")
    if not isinstance(scopes, list) or not scopes:
        problems.append("scopes: expected a non-empty array")
    elif not all(isinstance(s, str) and s for s in scopes):
        problems.append("scopes: expected non-empty strings")
    for key in _GRANT_TEXT[3:]:
        value = grant.get(key)
        if (
            not isinstance(value, str)
            or not _GRANT_TIME.fullmatch(value)
            or _instant(value) is None
        ):
            problems.append(f"{key}: expected an ISO datetime with Z")
    if problems:
        return None, "", f"invalid delegation: {'; '.join(problems)}"
    return grant, result.keyid, ""


def _executed(predicate: Any) -> bool:
    return at(predicate, "execution", "status") in ("executed", "failed")


def verify_bundle(bundle: Any, opts: VerifyOptions) -> VerifyResult:
    """Every check of SPEC-EXTRAS 1.6, in order; stops where the original stops."""
    c = _Checks()
    envelope = at(bundle, "envelope")
    sig = verify_envelope(envelope, opts.issuer_keys)
    if not sig.ok:
        c.add("receipt signature (issuer key)", False, sig.error)
        return c.done(None)
    c.add("receipt signature (issuer key)", True, f"keyid {sig.keyid[:12]}")
    st = sig.payload
    typed = (
        at(envelope, "payloadType") == IN_TOTO_TYPE
        and at(st, "predicateType") == RECEIPT_PREDICATE_TYPE
    )
    if not c.add("receipt payload type", typed):
        return c.done(None)
    p = at(st, "predicate")
    kind = at(p, "issuer", "kind")
    framework = at(p, "issuer", "framework")
    c.add(
        "issuer kind is known",
        kind in ("gateway", "sdk"),
        text(MISSING if kind is None else kind)
        + (f" / {text(framework)}" if truthy(framework) else ""),
    )
    c.add("issuer keyid matches signer", at(p, "issuer", "keyid") == sig.keyid)
    if kind == "gateway":
        c.add("gateway receipt carries a delegation", has(p, "delegation"))
        # JavaScript's `p.policy !== null`: a missing policy passes, an explicit null fails.
        c.add(
            "gateway receipt carries a policy decision",
            not (has(p, "policy") and p["policy"] is None),
        )
    _delegation_checks(c, p, opts)
    args_digest = at(p, "request", "argsDigest")
    c.add(
        "request args digest",
        digest_of(at(p, "request", "args")) == args_digest
        and at(st, "subject", 0, "digest", "sha256") == args_digest,
    )
    _upstream_check(c, p, opts)
    policy = at(p, "policy")
    if truthy(policy):
        decision = at(policy, "decision")
        status = at(p, "execution", "status")
        consistent = status != "denied" if decision == "allow" else status == "denied"
        c.add(
            "policy decision consistent with execution",
            consistent,
            f"{text(MISSING if decision is None else decision)} -> {text(MISSING if status is None else status)}",
        )
        errors = at(policy, "errors")
        c.add("no policy errors on an allow", not (decision == "allow" and truthy_length(errors)))
    log_keys = list(opts.log_keys or [])
    if truthy(at(p, "authorization")):
        _authorization_checks(c, bundle, p, sig.keyid, opts, log_keys)
    _tree_head_checks(c, bundle, opts, log_keys)
    return c.done(st)


def _delegation_checks(c: _Checks, p: Any, opts: VerifyOptions) -> None:
    if not truthy(at(p, "delegation")):
        c.add(
            "principal is claimed, not attested",
            at(p, "principal", "provenance") == "claimed",
            "no signed delegation in this receipt",
        )
        return
    grant, keyid, error = verify_delegation(at(p, "delegation", "envelope"), opts.principal_keys)
    c.add(
        "delegation signature (principal key)",
        grant is not None,
        f"signed by {keyid[:12]}" if grant is not None else error,
    )
    if grant is None:
        return
    attested = at(p, "principal", "provenance") == "attested"
    principal_keyid = at(p, "principal", "keyid") if attested else None
    c.add(
        "delegation binds principal and agent",
        grant["principal"] == at(p, "principal", "id")
        and grant["agent"] == at(p, "agent", "id")
        and keyid == principal_keyid,
    )
    moment = _instant(at(p, "timestamp"))
    start, end = _instant(grant["issuedAt"]), _instant(grant["expiresAt"])
    valid = moment is not None and start is not None and end is not None and start <= moment <= end
    c.add("delegation valid at receipt time", valid, f"{grant['issuedAt']} .. {grant['expiresAt']}")
    tool = at(p, "tool", "name")
    in_scope = tool in grant["scopes"]
    c.add(
        "executed tool within delegated scope",
        not _executed(p) or in_scope,
        text(tool) if in_scope else f"{text(tool)} not in [{', '.join(grant['scopes'])}]",
    )


def _upstream_check(c: _Checks, p: Any, opts: VerifyOptions) -> None:
    upstream = at(p, "execution", "upstream")
    if not _executed(p) or not truthy(upstream):
        return
    if at(upstream, "provider") in ("stripe-webhook", "github-delivery") and isinstance(
        at(upstream, "rawBody"), str
    ):
        return  # a provider delivery: checked only with provider secrets, which no extra passes
    if not opts.upstream_keys:
        return
    envelope = at(upstream, "envelope")
    u = verify_envelope(envelope, opts.upstream_keys)
    ok, detail = u.ok, (f"keyid {u.keyid[:12]}" if u.ok else u.error)
    if u.ok:
        result = at(p, "execution", "result")
        expected = digest_of(
            {"content": at(result, "content"), "isError": bool(at(result, "isError"))}
        )
        kind = at(envelope, "payloadType")
        if kind != UPSTREAM_TYPE:
            ok, detail = False, f"payload type {text(kind)}"
        elif at(u.payload, "receiptId") != at(p, "receiptId"):
            ok, detail = False, "signed for a different receipt"
        elif at(u.payload, "tool") != at(p, "tool", "name"):
            ok, detail = False, f"signed for tool {text(at(u.payload, 'tool'))}"
        elif at(u.payload, "contentDigest") != expected:
            ok, detail = False, "signed content differs from the result in the receipt"
    c.add("upstream signature (upstream key)", ok, detail)


def _authorization_checks(
    c: _Checks, bundle: Any, p: Any, receipt_keyid: str, opts: VerifyOptions, log_keys: list[Any]
) -> None:
    a = at(p, "authorization")
    asig = verify_envelope(at(a, "envelope"), opts.issuer_keys)
    ast = asig.payload if asig.ok else None
    typed = (
        asig.ok
        and at(a, "envelope", "payloadType") == IN_TOTO_TYPE
        and at(ast, "predicateType") == AUTHORIZATION_PREDICATE_TYPE
    )
    detail = (
        (f"keyid {asig.keyid[:12]}" if typed else "not an authorization statement")
        if asig.ok
        else asig.error
    )
    c.add("authorization signature (issuer key)", typed and asig.keyid == receipt_keyid, detail)
    if not typed:
        return
    ap = at(ast, "predicate")
    same = (
        at(ap, "receiptId") == at(p, "receiptId")
        and at(ap, "tool", "name") == at(p, "tool", "name")
        and at(ap, "request", "argsDigest") == at(p, "request", "argsDigest")
        and at(ap, "agent", "id") == at(p, "agent", "id")
        and at(ap, "principal", "id") == at(p, "principal", "id")
        and at(ap, "policy", "decision") == "allow"
    )
    c.add(
        "authorization names this call",
        same,
        f"{text(at(ap, 'tool', 'name'))} for receipt {text(at(ap, 'receiptId'))[:12]}"
        if same
        else "committed for a different receipt, tool, arguments, agent, or decision",
    )
    ath = verify_envelope(at(a, "treeHead"), [*log_keys, *opts.issuer_keys])
    c.add(
        "authorization tree head signature",
        ath.ok and at(a, "treeHead", "payloadType") == TREEHEAD_TYPE,
        f"keyid {ath.keyid[:12]}" if ath.ok else ath.error,
    )
    if not ath.ok:
        return
    inclusion = at(a, "inclusion")
    index, size = at(inclusion, "leafIndex"), at(inclusion, "treeSize")
    included = at(ath.payload, "treeSize") == size and verify_inclusion(
        envelope_leaf_hash(at(a, "envelope")), inclusion, at(ath.payload, "rootHash")
    )
    c.add("authorization log inclusion proof", included, f"leaf {text(index)} of {text(size)}")
    receipt_index = at(bundle, "inclusion", "leafIndex")
    receipt_size = at(bundle, "inclusion", "treeSize")
    before = _less(index, receipt_index, strict=True) and _less(size, receipt_size, strict=False)
    c.add(
        "authorization logged before execution",
        before,
        f"authorization leaf {text(index)}, receipt leaf {text(receipt_index)}",
    )


def truthy_length(value: Any) -> bool:
    """``value.length > 0`` for an array or a string."""
    return isinstance(value, list | str) and len(value) > 0


def _less(a: Any, b: Any, *, strict: bool) -> bool:
    numbers = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b))
    return numbers and (a < b if strict else a <= b)


def _tree_head_checks(c: _Checks, bundle: Any, opts: VerifyOptions, log_keys: list[Any]) -> None:
    tree_head = at(bundle, "treeHead")
    th = verify_envelope(tree_head, [*log_keys, *opts.issuer_keys])
    by_log = th.ok and any(k.keyid == th.keyid for k in log_keys)
    c.add(
        "tree head signature",
        th.ok and at(tree_head, "payloadType") == TREEHEAD_TYPE,
        f"{'log key' if by_log else 'issuer key'} {th.keyid[:12]}" if th.ok else th.error,
    )
    if not th.ok:
        return
    head = th.payload
    if opts.log_id is not None:
        log = at(head, "log")
        c.add(
            "tree head names the expected log",
            log == opts.log_id,
            f"log {text(log)}" if log else "tree head names no log",
        )
    inclusion = at(bundle, "inclusion")
    c.add(
        "tree head matches inclusion proof size",
        at(head, "treeSize") == at(inclusion, "treeSize"),
    )
    root_hash = at(head, "rootHash")
    c.add(
        "log inclusion proof",
        verify_inclusion(envelope_leaf_hash(at(bundle, "envelope")), inclusion, root_hash),
        f"leaf {text(at(inclusion, 'leafIndex'))} of {text(at(inclusion, 'treeSize'))}, "
        f"root {text(root_hash)[:12]}",
    )
