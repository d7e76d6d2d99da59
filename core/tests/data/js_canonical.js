const crypto = require('crypto');
function canon(v){ if (v===null||typeof v!=='object') return JSON.stringify(v);
 if (Array.isArray(v)) return '['+v.map(canon).join(',')+']';
 return '{'+Object.keys(v).sort().map(k=>JSON.stringify(k)+':'+canon(v[k])).join(',')+'}'; }
const cases = JSON.parse(require('fs').readFileSync(0,'utf8'));
const out = cases.map(c => { const s = canon(c); return {canonical: s, sha256: crypto.createHash('sha256').update(s,'utf8').digest('hex'), hmac: crypto.createHmac('sha256','k3y').update(s,'utf8').digest('hex')}; });
console.log(JSON.stringify(out));
