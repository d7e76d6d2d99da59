// The original's signing and verification rules for the extras' signed files, written for these
// tests from SPEC-EXTRAS (0, 1.2, 1.3, 3.3, 4, 6.6) with Node's own crypto, base64 and JSON, so
// nothing on this side shares code with the Python implementation.
// stdin: {key: PKCS8 PEM, pub: SPKI PEM, sign: [{subject, predicateType, predicate, digestOver?}],
//         verify: [{kind: "action-pack"|"custody-pack"|"eval-report", envelope}],
//         bundles: [bundle], pretty: [text]}
// stdout: {signed: [envelope], verified: [{ok, checks|error}], bundles: [{signature, inclusion}],
//          pretty: [JSON.stringify(JSON.parse(text), null, 2) === text]}
const crypto = require('crypto');

function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v === null || typeof v !== 'object') return v;
  const out = {};
  for (const k of Object.keys(v).sort()) if (v[k] !== undefined) out[k] = sortKeys(v[k]);
  return out;
}
const canonicalize = (v) => JSON.stringify(sortKeys(v));
const sha256 = (data) => crypto.createHash('sha256').update(data).digest('hex');
const digestOf = (v) => sha256(canonicalize(v));
const keyidOf = (pub) => sha256(pub.export({ type: 'spki', format: 'der' }));
const pae = (type, payload) =>
  Buffer.concat([Buffer.from(`DSSEv1 ${Buffer.byteLength(type)} ${type} ${payload.length} `), payload]);

function sign(type, obj, privateKey) {
  const payload = Buffer.from(canonicalize(obj));
  const publicKey = crypto.createPublicKey(privateKey);
  return {
    payloadType: type,
    payload: payload.toString('base64'),
    signatures: [{ keyid: keyidOf(publicKey), sig: crypto.sign(null, pae(type, payload), privateKey).toString('base64') }],
  };
}

function verify(env, trusted) {
  if (!env || typeof env.payload !== 'string' || !Array.isArray(env.signatures) || env.signatures.length === 0)
    return { ok: false, error: 'malformed envelope' };
  const payload = Buffer.from(env.payload, 'base64');
  for (const s of env.signatures) {
    const key = trusted.find((t) => t.keyid === s.keyid);
    if (!key) continue;
    if (!crypto.verify(null, pae(env.payloadType, payload), key.publicKey, Buffer.from(s.sig, 'base64')))
      return { ok: false, error: `signature by ${s.keyid.slice(0, 12)} did not verify` };
    try {
      return { ok: true, payload: JSON.parse(payload.toString()), keyid: s.keyid };
    } catch {
      return { ok: false, error: 'payload is not JSON' };
    }
  }
  return { ok: false, error: `no trusted key matches keyids [${env.signatures.map((s) => s.keyid.slice(0, 12)).join(', ')}]` };
}

const TYPES = {
  'action-pack': 'https://agent-custody.dev/action-pack/v0.1',
  'custody-pack': 'https://agent-custody.dev/custody-pack/v0.1',
  'eval-report': 'https://agent-custody.dev/eval-report/v0.1',
};

function verifySigned(kind, env, trusted) {
  const v = verify(env, trusted);
  if (!v.ok) return { ok: false, error: v.error };
  const st = v.payload;
  if (st.predicateType !== TYPES[kind] || !st.predicate) return { ok: false, error: `not a ${kind}: ${String(st.predicateType)}` };
  const over = kind === 'eval-report' ? st.predicate.report : st.predicate;
  if (st.subject?.[0]?.digest?.sha256 !== digestOf(over)) return { ok: false, error: 'digest does not match the subject' };
  return { ok: true, keyid: v.keyid, subject: st.subject[0].name };
}

// RFC 9162 2.1.3.2, as SPEC-EXTRAS 1.3 states it.
function inclusionOk(bundle, rootHash) {
  const node = (l, r) => crypto.createHash('sha256').update(Buffer.concat([Buffer.from([1]), l, r])).digest();
  let r = crypto.createHash('sha256').update(Buffer.concat([Buffer.from([0]), Buffer.from(canonicalize(bundle.envelope))])).digest();
  let fn = bundle.inclusion.leafIndex;
  let sn = bundle.inclusion.treeSize - 1;
  if (fn < 0 || sn < 0 || fn > sn) return false;
  for (const h of bundle.inclusion.hashes) {
    const p = Buffer.from(h, 'hex');
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      r = node(p, r);
      if (fn % 2 === 0) while (fn % 2 === 0 && fn !== 0) { fn >>= 1; sn >>= 1; }
    } else r = node(r, p);
    fn >>= 1;
    sn >>= 1;
  }
  return sn === 0 && r.toString('hex') === rootHash;
}

const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const privateKey = input.key ? crypto.createPrivateKey(input.key) : null;
const trusted = (input.pubs || []).map((pem) => {
  const publicKey = crypto.createPublicKey(pem);
  return { publicKey, keyid: keyidOf(publicKey) };
});
const out = {
  signed: (input.sign || []).map((item) =>
    sign('application/vnd.in-toto+json', {
      _type: 'https://in-toto.io/Statement/v1',
      subject: [{ name: item.subject, digest: { sha256: digestOf(item.digestOver === undefined ? item.predicate : item.digestOver) } }],
      predicateType: item.predicateType,
      predicate: item.predicate,
    }, privateKey)),
  verified: (input.verify || []).map((item) => verifySigned(item.kind, item.envelope, trusted)),
  bundles: (input.bundles || []).map((bundle) => {
    const sig = verify(bundle.envelope, trusted);
    const head = verify(bundle.treeHead, trusted);
    return { signature: sig.ok, inclusion: head.ok && inclusionOk(bundle, head.payload.rootHash) };
  }),
  pretty: (input.pretty || []).map((text) => JSON.stringify(JSON.parse(text), null, 2) === text),
};
process.stdout.write(JSON.stringify(out));
