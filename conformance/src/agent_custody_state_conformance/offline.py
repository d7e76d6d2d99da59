"""An offline verifier of an erasure certificate and a JSONL ledger's chain, from docs/proofs.md
alone (standard library and ``cryptography``), read in one sitting: exit 0 ``ok``, 1 ``FAILED``."""

import argparse
import base64
import hashlib
import hmac
import json
import re
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization as ser

PREDICATE = "https://agent-custody.dev/erasure-certificate/v0.1"
load = partial(json.loads, parse_int=lambda s: int(s) if abs(int(s)) < 2**53 else float(s))
INDEX = re.compile("0|[1-9][0-9]*")  # an array index, which JavaScript orders first
LONE = re.compile("[\ud800-\udfff]")  # a lone surrogate: JSON.stringify writes it as \uXXXX


def number(x: float) -> str:  # JavaScript's Number.prototype.toString (ECMA-262 7.1.12.1)
    _, digit_tuple, exp = Decimal(repr(abs(float(x)))).normalize().as_tuple()
    ds, sign = "".join(map(str, digit_tuple)), "-" if x < 0 else ""
    k, point = len(ds), len(digit_tuple) + int(exp)
    if 0 < point <= 21:  # an integer, or a point among the digits
        return sign + (ds + "0" * (point - k) if k <= point else f"{ds[:point]}.{ds[point:]}")
    if -6 < point <= 0:
        return sign + "0." + "0" * -point + ds
    e, rest = point - 1, "." + ds[1:] if k > 1 else ""
    return f"{sign}{ds[0]}{rest}e{'+' if e > 0 else '-'}{abs(e)}"


def need(ok: object, why: str) -> None:
    if not ok:
        raise ValueError(why)


def key_order(key: str) -> tuple[int, int, bytes]:  # array indices first, then UTF-16 order
    index = INDEX.fullmatch(key) and int(key) < 2**32 - 1
    return (0, int(key), b"") if index else (1, 0, key.encode("utf-16-be", "surrogatepass"))


def canonical(v: Any) -> str:  # SPEC 2.5: JavaScript's key order, JSON.stringify's forms
    if v is None or isinstance(v, (bool, str)):  # JSON.stringify's escapes are Python's
        return LONE.sub(lambda m: f"\\u{ord(m[0]):04x}", json.dumps(v, ensure_ascii=False))
    if isinstance(v, (int, float)):
        return number(v)
    if isinstance(v, list):
        return "[" + ",".join(canonical(x) for x in v) + "]"
    keys = sorted(v, key=key_order)
    return "{" + ",".join(f"{canonical(k)}:{canonical(v[k])}" for k in keys) + "}"


def leaf(event: dict[str, Any]) -> bytes:  # the redacted form: no chain record, no value
    form = {k: v for k, v in event.items() if k != "chain"}
    if event.get("kind") == "assert" and isinstance(event.get("fact"), dict):
        erased = ("value", "valueSalt", "forgotten")
        form["fact"] = {k: v for k, v in event["fact"].items() if k not in erased}
    return hashlib.sha256(b"\0" + canonical(form).encode("utf-8", "surrogatepass")).digest()


def check_chain(path: str) -> list[dict[str, Any]]:  # leaves, links, records, commitments
    head, events, started = bytes(32), list[dict[str, Any]](), False
    for n, line in enumerate(filter(bytes.strip, Path(path).read_bytes().split(b"\n")), 1):
        try:
            event = load(line.decode("utf-8"))
        except ValueError:
            raise ValueError(f"event {n}: not a valid JSON event") from None
        previous, lf = head, leaf(event)
        head, record = hashlib.sha256(b"\1" + previous + lf).digest(), event.get("chain")
        need(isinstance(record, dict) or not started, f"event {n}: no chain record")
        if isinstance(record, dict):
            started, genesis = True, record.get("genesis", {"size": n - 1, "head": previous.hex()})
            need(genesis == {"size": n - 1, "head": previous.hex()}, f"event {n}: bad genesis")
            mine = {"seq": n, "leaf": lf.hex(), "head": head.hex()}
            need(all(record.get(k) == v for k, v in mine.items()), f"event {n}: bad chain record")
        fact = event.get("fact") if event.get("kind") == "assert" else None
        if isinstance(fact, dict) and "valueCommitment" in fact and fact.get("forgotten") is None:
            salt = base64.b64decode(fact.get("valueSalt") or "")
            value = canonical(fact.get("value")).encode("utf-8", "surrogatepass")
            mac = hmac.new(salt, value, "sha256").hexdigest()
            need(salt and mac == fact["valueCommitment"], f"event {n}: value is not committed")
        events.append(event)
    return events


def check_certificate(envelope: dict[str, Any], pem: bytes) -> dict[str, Any]:
    """The statement, once the signature and shape hold."""
    try:
        key = ser.load_pem_public_key(pem)
    except ValueError:  # the private key will do: its public half
        key = ser.load_pem_private_key(pem, None).public_key()
    payload, kind = base64.b64decode(envelope["payload"]), envelope["payloadType"].encode()
    spki = key.public_bytes(ser.Encoding.DER, ser.PublicFormat.SubjectPublicKeyInfo)
    sigs = [s for s in envelope["signatures"] if s["keyid"] == hashlib.sha256(spki).hexdigest()]
    need(sigs, "signature: no signature by this key")
    pae = b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)
    key.verify(base64.b64decode(sigs[0]["sig"]), pae)  # type: ignore[union-attr, call-arg]
    st = load(payload.decode("utf-8"))
    p = st.get("predicate") or {}
    need(st.get("_type") == "https://in-toto.io/Statement/v1", "not an in-toto statement")
    need(st.get("predicateType") == PREDICATE, "not an erasure certificate")
    need(len(st.get("subject") or []) == 1, "the statement has not one subject")
    need(p.get("outcome") in ("complete", "partial"), "outcome is malformed")
    v, stores = p["verification"], [s["verification"] != "verified" for s in p["stores"]["stores"]]
    dirty = v["byteScan"].get("hits") or v.get("keysNotFound") or any(stores)
    need(p["outcome"] == "partial" or not dirty, "outcome is complete, but it is not")
    need(p["chain"]["after"]["size"] > p["chain"]["before"]["size"], "chain heads out of order")
    return dict(st)


def check_against(st: dict[str, Any], events: list[dict[str, Any]]) -> None:
    p, fact_id, digest = st["predicate"], st["subject"][0]["name"], st["subject"][0]["digest"]
    origin = "agent-custody-state/chain/" + (events[0]["eventId"] if events else "-")
    need(p["media"]["ledgerId"] == origin, "the ledger is not the certificate's ledger")
    for which in ("before", "after"):
        size, head = p["chain"][which]["size"], p["chain"][which]["head"]
        stored = (events[size - 1].get("chain") or {}) if 0 < size <= len(events) else {}
        need(not size or stored.get("head") == head, f"chain head {which} is not in this ledger")
    forget = events[p["chain"]["after"]["size"] - 1]
    need(forget.get("kind") == "forget" and forget.get("factId") == fact_id, "no such forget")
    kind, value = forget.get("digestKind"), forget.get("valueDigest")
    need(value is None or digest == {kind: value}, "the forget's digest is not the subject's")
    asserts = (e["fact"] for e in events if e.get("kind") == "assert")
    fact: dict[str, Any] = next((f for f in asserts if f.get("factId") == fact_id), {})
    gone = fact and fact.get("value") is None and (fact.get("forgotten") or {}).get("valueDigest")
    need(gone == value, f"fact {fact_id} is not forgotten in this ledger with the subject's digest")


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser("python -m agent_custody_state_conformance.offline")
    cli.add_argument("cert", type=Path, metavar="CERT", help="the erasure certificate (DSSE)")
    cli.add_argument("--key", type=Path, required=True, metavar="PUB", help="the signer's PEM key")
    cli.add_argument("--ledger", metavar="L.jsonl", help="also check it against this JSONL ledger")
    a = cli.parse_args(argv)
    try:
        st = check_certificate(json.loads(a.cert.read_text("utf-8")), a.key.read_bytes())
        if a.ledger is not None:
            check_against(st, check_chain(a.ledger))
    except Exception as exc:  # every failure is a reason, printed on one line
        print(f"FAILED: {str(exc) or type(exc).__name__}")
        return 1
    print(f"ok: fact {st['subject'][0]['name']} erased, outcome {st['predicate']['outcome']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
