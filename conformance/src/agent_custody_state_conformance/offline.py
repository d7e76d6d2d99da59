"""An offline verifier of an erasure certificate and a JSONL ledger's chain, from docs/proofs.md
alone (standard library and ``cryptography``), read in one sitting: exit 0 ``ok``, 1 ``FAILED``."""

import argparse
import base64
import hashlib
import hmac
import json
import math
import re
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization as ser

PREDICATE = "https://agent-custody.dev/erasure-certificate/v0.1"
HEX = re.compile("[0-9a-f]{64}")
SECTIONS = ["media", "confidentiality", "sanitization", "tool", "verification", "destination",
            "sanitizer", "verifier", "request", "legalHolds", "chain", "residualWindows", "stores",
            "outcome", "incomplete"]  # fmt: skip
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


def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:  # in any object, of any event too
    made = dict(items)
    need(len(made) == len(items), "a key twice: readers disagree on its value")
    return made


def finite(x: float) -> float:  # 1e400 reads as an infinity, which canonical JSON writes null
    need(math.isfinite(x), "a number too large for a double: no JSON here")
    return x


strict = partial(json.loads, object_pairs_hook=pairs, parse_float=lambda s: finite(float(s)),
                 parse_int=lambda s: finite(int(s) if abs(int(s)) < 2**53 else float(s)),
                 parse_constant=lambda c: need(0, f"{c}: no JSON"))  # fmt: skip


def b64(text: Any, what: str) -> bytes:  # RFC 4648 section 4 exactly: another spelling is an edit
    raw = base64.b64decode(text, validate=True) if isinstance(text, str) else b""
    need(isinstance(text, str) and base64.b64encode(raw).decode() == text, f"{what}: not base64")
    return raw


def key_order(key: str) -> tuple[int, int, bytes]:  # array indices first, then UTF-16 order
    index = INDEX.fullmatch(key) and int(key) < 2**32 - 1
    return (0, int(key), b"") if index else (1, 0, key.encode("utf-16-be", "surrogatepass"))


def canonical(v: Any) -> str:  # SPEC 2.5: JavaScript's key order, JSON.stringify's forms
    if v is None or isinstance(v, (bool, str)):  # JSON.stringify's escapes are Python's
        return LONE.sub(lambda m: f"\\u{ord(m[0]):04x}", json.dumps(v, ensure_ascii=False))
    if isinstance(v, (int, float)):  # JSON.stringify writes a non-finite number (1e400) as null
        return number(v) if math.isfinite(v) else "null"
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


def sealed(value: Any) -> bool:  # a crypto-shred envelope: its commitment needs the key store
    keys = isinstance(value, dict) and sorted(value) == ["ct", "iv", "kid", "shred"]
    return keys and value["shred"] == "A256GCM" and isinstance(value["kid"], str)


def check_chain(path: str) -> list[dict[str, Any]]:  # leaves, links, records, commitments
    head, events, started, gap = bytes(32), list[dict[str, Any]](), False, False
    forgotten: dict[str, tuple[Any, ...]] = {}  # fact id -> its assert's forgotten record
    live, gone = set[str](), set[str]()  # facts an assert holds a value of; facts forgotten
    lines = filter(bytes.strip, Path(path).read_bytes().split(b"\n"))
    for n, line in enumerate(lines, 1):
        try:
            event = strict(line.decode("utf-8"))
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"event {n}: not a valid JSON event ({exc})") from None
        need(isinstance(event, dict), f"event {n}: not a JSON object")
        previous, lf, record = head, leaf(event), event.get("chain")
        head, fact = hashlib.sha256(b"\1" + previous + lf).digest(), event.get("fact")
        fact = fact if event.get("kind") == "assert" and isinstance(fact, dict) else {}
        if record is None:  # an event of the original's, or before the chain: a genesis follows
            ours = fact.get("valueSalt") is not None or "valueCommitment" in fact
            need(not ours, f"event {n}: a value commitment, but no chain record")
            gap = gap or started
        else:
            need(isinstance(record, dict), f"event {n}: the chain record is not an object")
            g = record.get("genesis")
            if started and not gap:
                need(g is None, f"event {n}: a genesis record in the middle of the chain")
            else:  # the first chained event, or the first after events without a record
                g = g if isinstance(g, dict) else {}
                good = isinstance(g.get("size"), int) and g["size"] == n - 1
                need(good and g.get("head") == previous.hex(), f"event {n}: bad genesis")
            started, gap = True, False
            mine = {"seq": n, "leaf": lf.hex(), "head": head.hex()}
            need(type(record.get("seq")) is int, f"event {n}: bad chain record")
            need(all(record.get(k) == v for k, v in mine.items()), f"event {n}: bad chain record")
        if "valueCommitment" in fact and fact.get("forgotten") is not None:
            need(fact.get("value") is None, f"event {n}: forgotten, but it holds a value")
            need(isinstance(fact["forgotten"], dict), f"event {n}: forgotten is not an object")
            got = [fact["forgotten"].get(k) for k in ("valueDigest", "digestKind", "at")]
            forgotten[str(fact.get("factId"))] = tuple(got)
        elif "valueCommitment" in fact and not sealed(fact.get("value")):
            salt = b64(fact.get("valueSalt"), f"event {n}: the value salt")
            value = canonical(fact.get("value")).encode("utf-8", "surrogatepass")
            mac = hmac.new(salt, value, "sha256").hexdigest()
            need(mac == fact["valueCommitment"], f"event {n}: value is not committed")
        else:  # sealed (crypto-shred): checked with the key store only, as verify does
            salted = "valueCommitment" not in fact or isinstance(fact.get("valueSalt"), str)
            need(salted, f"event {n}: the value salt is missing")
        if fact and fact.get("forgotten") is None:
            live.add(str(fact.get("factId")))
        gone |= {str(event.get("factId"))} if event.get("kind") == "forget" else set()
        if event.get("kind") == "forget" and str(event.get("factId")) in forgotten:
            said = (event.get("valueDigest"), event.get("digestKind"), event.get("txTime"))
            need(forgotten.pop(str(event.get("factId"))) == said, f"event {n}: not its forget")
        events.append(event)
    need(not gap and not forgotten, "events at the end carry no chain record, or no forget")
    need(not live & gone, "a forget event erased a value an assert holds again")
    return events


def check_certificate(envelope: dict[str, Any], pem: bytes) -> dict[str, Any]:
    """The statement, once the signature and shape hold."""
    try:
        key = ser.load_pem_public_key(pem)
    except ValueError:  # the private key will do: its public half
        key = ser.load_pem_private_key(pem, None).public_key()
    kind, payload = envelope["payloadType"], b64(envelope["payload"], "the payload")
    need(kind == "application/vnd.in-toto+json", "payloadType is not in-toto's")
    spki = key.public_bytes(ser.Encoding.DER, ser.PublicFormat.SubjectPublicKeyInfo)
    keyid = hashlib.sha256(spki).hexdigest()
    sigs = [s for s in envelope["signatures"] if isinstance(s, dict) and s.get("keyid") == keyid]
    need(sigs, "signature: no signature by this key")
    pae = b"DSSEv1 %d %s %d %s" % (len(kind.encode()), kind.encode(), len(payload), payload)
    key.verify(b64(sigs[0]["sig"], "the signature"), pae)  # type: ignore[union-attr, call-arg]
    st = strict(payload.decode("utf-8"))
    p: Any = st.get("predicate") if isinstance(st, dict) else None
    need(isinstance(p, dict) and st.get("_type") == "https://in-toto.io/Statement/v1", "no in-toto")
    need(st.get("predicateType") == PREDICATE, "not an erasure certificate")
    subject = st.get("subject") if isinstance(st.get("subject"), list) else []
    one = len(subject) == 1 and isinstance(subject[0], dict)
    need(one and isinstance(subject[0].get("name"), str), "the statement has not one subject")
    need(isinstance(subject[0].get("digest"), dict), "the subject has no digest")
    lists, texts = ("residualWindows", "incomplete"), ("destination", "outcome")
    need(all(k in p and isinstance(p[k], list if k in lists else object if k in texts else dict)
             for k in SECTIONS), "the predicate is not of the certificate's shape")  # fmt: skip
    need(p["outcome"] in ("complete", "partial"), "outcome is malformed")
    v, stores, scan = p["verification"], p["stores"].get("stores", []), p["verification"]
    scan = scan.get("byteScan", {})
    files: Any = scan.get("files", []) if isinstance(scan, dict) else None
    need(isinstance(files, list) and isinstance(stores, list), "scan or stores are malformed")
    need(all(isinstance(x, dict) for x in files + stores), "scan or stores are malformed")
    dirty = scan.get("hits") or v.get("keysNotFound") or v.get("residue")
    dirty = dirty or any("error" in f for f in files)
    dirty = dirty or any(s.get("verification") != "verified" for s in stores)
    need(p["outcome"] == "partial" or not dirty, "outcome is complete, but it is not")
    need(p["outcome"] == "complete" or p["incomplete"], "outcome is partial, nothing incomplete")
    need(p["sanitization"].get("category") in ("Clear", "Purge"), "no sanitization category")
    heads = [p["chain"].get(w) for w in ("before", "after")]
    need(all(isinstance(h, dict) and type(h.get("size")) is int and h["size"] >= 0 and
             isinstance(h.get("head"), str) and HEX.fullmatch(h["head"]) and
             (h["size"] or h["head"] == "0" * 64) for h in heads), "chain heads are malformed")  # fmt: skip
    need(heads[1]["size"] > heads[0]["size"], "chain heads out of order")
    return dict(st)


def check_against(st: dict[str, Any], events: list[dict[str, Any]]) -> None:
    p, fact_id, digest = st["predicate"], st["subject"][0]["name"], st["subject"][0]["digest"]
    origin = "agent-custody-state/chain/" + str(events[0].get("eventId") if events else "-")
    need(p["media"]["ledgerId"] == origin, "the ledger is not the certificate's ledger")
    for which in ("before", "after"):
        size, head = p["chain"][which]["size"], p["chain"][which]["head"]
        stored = (events[size - 1].get("chain") or {}) if 0 < size <= len(events) else {}
        need(not size or stored.get("head") == head, f"chain head {which} is not in this ledger")
    forget = events[p["chain"]["after"]["size"] - 1]
    need(forget.get("kind") == "forget" and forget.get("factId") == fact_id, "no such forget")
    need(forget.get("eventId") == p["request"].get("forgetEventId"), "not the forget's id")
    kind, value = forget.get("digestKind"), forget.get("valueDigest")
    need(value is None or digest == {kind: value}, "the forget's digest is not the subject's")
    asserts = (e for e in events if e.get("kind") == "assert" and isinstance(e.get("fact"), dict))
    facts = [e["fact"] for e in asserts if e["fact"].get("factId") == fact_id]
    need(facts, f"fact {fact_id} is not forgotten with the subject's digest: no assert")
    for fact in facts:  # every assert of the fact: one holding its value is enough
        commitment = fact.get("valueCommitment")
        kept = {"valueCommitment": commitment} if isinstance(commitment, str) else {}
        need(value is not None or digest == kept, "the value commitment is not the subject's")
        gone = fact.get("forgotten") if fact.get("value") is None else None
        gone = (gone.get("digestKind"), gone.get("valueDigest")) if isinstance(gone, dict) else None
        need(gone == (kind, value), f"fact {fact_id} is not forgotten with the subject's digest")


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser("python -m agent_custody_state_conformance.offline")
    cli.add_argument("cert", type=Path, metavar="CERT", help="the erasure certificate (DSSE)")
    cli.add_argument("--key", type=Path, required=True, metavar="PUB", help="the signer's PEM key")
    cli.add_argument("--ledger", metavar="L.jsonl", help="also check it against this JSONL ledger")
    a = cli.parse_args(argv)
    try:
        st = check_certificate(strict(a.cert.read_text("utf-8")), a.key.read_bytes())
        if a.ledger is not None:
            check_against(st, check_chain(a.ledger))
    except Exception as exc:  # every failure is a reason, printed on one line
        print(f"FAILED: {str(exc) or type(exc).__name__}")
        return 1
    print(f"ok: fact {st['subject'][0]['name']} erased, outcome {st['predicate']['outcome']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
