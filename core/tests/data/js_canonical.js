// Reference for the canonical JSON tests, done the way the TypeScript original does it: rebuild
// every object with its keys sorted (Array.prototype.sort, i.e. by UTF-16 code units), then
// JSON.stringify the copy. JavaScript itself then lists array-index keys first, in numeric order,
// so nothing here re-implements that rule.
// Reads a JSON array of values on stdin; writes, for each, the canonical text, its SHA-256 and
// HMAC-SHA256 (key "k3y"), and the plain JSON.stringify of the parsed value (what a JSONL line
// holds for it).
const crypto = require('crypto');

function sorted(v) {
  if (Array.isArray(v)) return v.map(sorted);
  if (v === null || typeof v !== 'object') return v;
  const copy = {};
  // Plain assignment, as in the original (a "__proto__" key would be lost, as it is there).
  for (const k of Object.keys(v).sort()) copy[k] = sorted(v[k]);
  return copy;
}

const values = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const out = values.map((v) => {
  const canonical = JSON.stringify(sorted(v));
  return {
    canonical,
    sha256: crypto.createHash('sha256').update(canonical, 'utf8').digest('hex'),
    hmac: crypto.createHmac('sha256', 'k3y').update(canonical, 'utf8').digest('hex'),
    stringify: JSON.stringify(v),
  };
});
process.stdout.write(JSON.stringify(out));
