// atmost's identity rules in JavaScript, for producers that are not written in Go: the text
// normalization, RFC 8785 canonical JSON with atmost's strictness, the envelope and the
// delivery key, and the source version (the canonical source id and the normalized body). It is
// the rule docs/producers.md#the-delivery-key and #the-source-version state, written from that
// page and pkg/identity; check-vectors.mjs holds it to every case of
// testdata/identity-vectors.json. Node 20 or later, no packages: node:crypto for SHA-256,
// String.prototype.normalize for NFC.

import { createHash } from 'node:crypto';

export class JSONError extends Error {
  constructor(name, detail, path) {
    super(`${name}: ${detail}`);
    this.code = name; // malformed_json, trailing_data, duplicate_key, invalid_utf8, not_object, inexact_number, too_deep
    this.path = path;
  }
}

export class RejectError extends Error {
  constructor(reason, detail) {
    super(`${reason}: ${detail}`);
    this.reason = reason;
  }
}

// The 25 code points of Unicode's White_Space property (unchanged since Unicode 6.3). Not
// String.prototype.trim: that trims U+FEFF and keeps U+0085.
const WHITE_SPACE = '\t\n\v\f\r \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000';
const TRIM = new RegExp(`^[${WHITE_SPACE}]+|[${WHITE_SPACE}]+$`, 'gu');

/** isWhiteSpace reports whether the code point c has Unicode's White_Space property. */
export function isWhiteSpace(c) {
  return WHITE_SPACE.includes(String.fromCodePoint(c));
}

/**
 * decodeUTF8 decodes bytes as Go's strings.ToValidUTF8(s, "\uFFFD") does: every maximal run of
 * bytes that are not part of a valid UTF-8 sequence becomes one U+FFFD (TextDecoder would write
 * one per ill-formed subsequence).
 */
export function decodeUTF8(bytes) {
  try {
    // Valid UTF-8, the common case, in one call; the loop below only for the rest.
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    // fall through
  }
  let out = '';
  let bad = false;
  for (let i = 0; i < bytes.length;) {
    const n = validSequenceAt(bytes, i);
    if (n === 0) {
      if (!bad) out += '\ufffd';
      bad = true;
      i++;
      continue;
    }
    bad = false;
    out += new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes.subarray(i, i + n));
    i += n;
  }
  return out;
}

// validSequenceAt returns the length of the well-formed UTF-8 sequence at b[i] (Unicode's
// Table 3-7: no overlongs, no surrogates, nothing above U+10FFFF), or 0.
function validSequenceAt(b, i) {
  const c = b[i];
  const cont = (j, lo = 0x80, hi = 0xbf) => i + j < b.length && b[i + j] >= lo && b[i + j] <= hi;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c === 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  if ((c >= 0xe1 && c <= 0xec) || c === 0xee || c === 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (c === 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
  if (c === 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xf1 && c <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c === 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

/** normalizeText: NFC, then CRLF and then lone CR to LF, then White_Space trimmed at both ends. */
export function normalizeText(s) {
  return s.normalize('NFC').replaceAll('\r\n', '\n').replaceAll('\r', '\n').replace(TRIM, '');
}

const utf8 = new TextEncoder();

function hashFields(domain, fields) {
  const h = createHash('sha256');
  for (const f of [utf8.encode(domain), ...fields]) {
    const n = Buffer.alloc(8);
    n.writeBigUInt64BE(BigInt(f.length));
    h.update(n);
    h.update(f);
  }
  return h.digest('hex');
}

/** textHash is th1: over the normalized text. */
export function textHash(text) {
  return 'th1:' + hashFields('atmost/text/v1', [utf8.encode(normalizeText(text))]);
}

/** claimID is cl1: over a source version (sv1:...) and the normalized claim. */
export function claimID(sourceVersion, content) {
  const version = Buffer.from(sourceVersion.slice(4), 'hex');
  return 'cl1:' + hashFields('atmost/claim/v1', [version, utf8.encode(normalizeText(content))]);
}

/** accountToken is the account's NATS subject token: itself, or "~" and base64url of its bytes. */
export function accountToken(account) {
  const bytes = toBytes(account);
  const plain = (c) => (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x5f || c === 0x2d;
  if (bytes.length > 0 && bytes.every(plain)) return new TextDecoder().decode(bytes);
  return '~' + Buffer.from(bytes).toString('base64url');
}

// ---- canonical JSON -------------------------------------------------------------------------

export const MAX_JSON_DEPTH = 64;

// A parsed value: {kind, value} with kind one of null, bool, number, string, array, object;
// an object's value is [[key, value], ...] sorted by UTF-16 code units, an array's a list.
class Parser {
  constructor(bytes, depth) {
    this.b = bytes;
    this.pos = 0;
    this.depth = depth;
    this.path = [];
  }

  fail(code, detail) {
    throw new JSONError(code, `${detail} (byte ${this.pos})`, [...this.path]);
  }

  space() {
    while (this.pos < this.b.length && [0x20, 0x09, 0x0a, 0x0d].includes(this.b[this.pos])) this.pos++;
  }

  value() {
    if (this.pos >= this.b.length) this.fail('malformed_json', 'unexpected end of input');
    const c = this.b[this.pos];
    if (c === 0x7b) return this.object();
    if (c === 0x5b) return this.array();
    if (c === 0x22) return { kind: 'string', value: this.string() };
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return { kind: 'number', value: this.number() };
    for (const [word, v] of [['true', { kind: 'bool', value: true }], ['false', { kind: 'bool', value: false }], ['null', { kind: 'null' }]]) {
      if (c === word.charCodeAt(0)) {
        for (let i = 0; i < word.length; i++) {
          if (this.b[this.pos + i] !== word.charCodeAt(i)) this.fail('malformed_json', `bad literal ${word}`);
        }
        this.pos += word.length;
        return v;
      }
    }
    this.fail('malformed_json', 'unexpected byte, expected a value');
  }

  enter() {
    if (++this.depth > MAX_JSON_DEPTH) this.fail('too_deep', `nesting exceeds ${MAX_JSON_DEPTH} levels`);
  }

  array() {
    this.enter();
    this.pos++;
    const out = [];
    this.space();
    if (this.b[this.pos] === 0x5d) {
      this.pos++;
      this.depth--;
      return { kind: 'array', value: out };
    }
    for (;;) {
      this.path.push(out.length);
      this.space();
      out.push(this.value());
      this.path.pop();
      this.space();
      const c = this.b[this.pos++];
      if (c === 0x5d) break;
      if (c !== 0x2c) { this.pos--; this.fail('malformed_json', "expected ',' or ']'"); }
    }
    this.depth--;
    return { kind: 'array', value: out };
  }

  object() {
    this.enter();
    this.pos++;
    const out = [];
    this.space();
    if (this.b[this.pos] === 0x7d) {
      this.pos++;
      this.depth--;
      return { kind: 'object', value: out };
    }
    for (;;) {
      this.space();
      if (this.b[this.pos] !== 0x22) this.fail('malformed_json', 'expected a member name');
      const key = this.string();
      this.space();
      if (this.b[this.pos] !== 0x3a) this.fail('malformed_json', "expected ':'");
      this.pos++;
      this.space();
      this.path.push(key);
      out.push([key, this.value()]);
      this.path.pop();
      this.space();
      const c = this.b[this.pos++];
      if (c === 0x7d) break;
      if (c !== 0x2c) { this.pos--; this.fail('malformed_json', "expected ',' or '}'"); }
    }
    this.depth--;
    // UTF-16 code unit order is JavaScript's own string order.
    out.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    for (let i = 1; i < out.length; i++) {
      if (out[i][0] === out[i - 1][0]) this.fail('duplicate_key', `member ${JSON.stringify(out[i][0])} appears more than once`);
    }
    return { kind: 'object', value: out };
  }

  string() {
    this.pos++;
    let s = '';
    for (;;) {
      if (this.pos >= this.b.length) this.fail('malformed_json', 'unexpected end of input in string');
      const c = this.b[this.pos];
      if (c === 0x22) { this.pos++; return s; }
      if (c < 0x20) this.fail('malformed_json', 'unescaped control character in string');
      if (c === 0x5c) { s += this.escape(); continue; }
      const n = validSequenceAt(this.b, this.pos);
      if (n === 0) this.fail('invalid_utf8', 'not valid UTF-8');
      s += new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(this.b.subarray(this.pos, this.pos + n));
      this.pos += n;
    }
  }

  hex4() {
    const h = new TextDecoder().decode(this.b.subarray(this.pos, this.pos + 4));
    if (!/^[0-9a-fA-F]{4}$/.test(h)) this.fail('malformed_json', 'bad \\u escape');
    this.pos += 4;
    return parseInt(h, 16);
  }

  escape() {
    const c = String.fromCharCode(this.b[this.pos + 1]);
    this.pos += 2;
    const short = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
    if (c in short) return short[c];
    if (c !== 'u') this.fail('malformed_json', 'invalid escape');
    const r = this.hex4();
    if (r >= 0xd800 && r <= 0xdbff) {
      if (this.b[this.pos] === 0x5c && this.b[this.pos + 1] === 0x75) {
        this.pos += 2;
        const lo = this.hex4();
        if (lo >= 0xdc00 && lo <= 0xdfff) return String.fromCharCode(r, lo);
      }
      this.fail('invalid_utf8', 'lone high surrogate');
    }
    if (r >= 0xdc00 && r <= 0xdfff) this.fail('invalid_utf8', 'lone low surrogate');
    return String.fromCharCode(r);
  }

  number() {
    const b = this.b;
    const digit = (i) => b[i] >= 0x30 && b[i] <= 0x39;
    const start = this.pos;
    let i = this.pos;
    if (b[i] === 0x2d) i++;
    if (b[i] === 0x30) {
      i++;
      if (digit(i)) { this.pos = i; this.fail('malformed_json', 'leading zero in number'); }
    } else if (digit(i)) {
      while (digit(i)) i++;
    } else {
      this.pos = i;
      this.fail('malformed_json', 'expected a digit');
    }
    if (b[i] === 0x2e) {
      i++;
      if (!digit(i)) { this.pos = i; this.fail('malformed_json', 'expected a digit after the decimal point'); }
      while (digit(i)) i++;
    }
    if (b[i] === 0x65 || b[i] === 0x45) {
      i++;
      if (b[i] === 0x2b || b[i] === 0x2d) i++;
      if (!digit(i)) { this.pos = i; this.fail('malformed_json', 'expected a digit in the exponent'); }
      while (digit(i)) i++;
    }
    const lit = new TextDecoder().decode(b.subarray(start, i));
    const f = Number(lit);
    // atmost's strictness: the canonical spelling must denote the value that was sent.
    if (!Number.isFinite(f) || !sameDecimal(lit, f.toExponential())) this.fail('inexact_number', `${lit} has no exact double`);
    this.pos = i;
    return f;
  }
}

// sameDecimal compares two number literals by exact decimal value.
function sameDecimal(a, b) {
  const d = (s) => {
    const neg = s.startsWith('-');
    if (neg) s = s.slice(1);
    const [mant, e = '0'] = s.split(/[eE]/);
    const [int, frac = ''] = mant.split('.');
    let digits = (int + frac).replace(/^0+/, '');
    if (digits === '') return '0';
    let exp = BigInt(e) - BigInt(frac.length);
    const trimmed = digits.replace(/0+$/, '');
    exp += BigInt(digits.length - trimmed.length);
    return `${neg ? '-' : ''}${trimmed}e${exp}`;
  };
  return d(a) === d(b);
}

function toBytes(input) {
  return typeof input === 'string' ? utf8.encode(input) : input;
}

/** parseJSON parses exactly one JSON value (bytes or string) as atmost's parser does. */
export function parseJSON(input, depth = 0) {
  const p = new Parser(toBytes(input), depth);
  p.space();
  const v = p.value();
  p.space();
  if (p.pos < p.b.length) p.fail('trailing_data', 'unexpected data after the value');
  return v;
}

/** serialize writes a parsed value in RFC 8785 form. */
export function serialize(v) {
  switch (v.kind) {
    case 'null': return 'null';
    case 'bool': return v.value ? 'true' : 'false';
    // ECMAScript's Number::toString is RFC 8785's number spelling; it writes -0 as 0.
    case 'number': return String(v.value);
    // JSON.stringify escapes exactly '"', '\\' and C0 controls, as RFC 8785 does.
    case 'string': return JSON.stringify(v.value);
    case 'array': return '[' + v.value.map(serialize).join(',') + ']';
    default: return '{' + v.value.map(([k, x]) => JSON.stringify(k) + ':' + serialize(x)).join(',') + '}';
  }
}

/** canonicalJSON returns the canonical form of one JSON value, or throws a JSONError. */
export function canonicalJSON(input) {
  return serialize(parseJSON(input));
}

/** canonicalObject is canonicalJSON for a value that must be an object. */
export function canonicalObject(input) {
  const v = parseJSON(input);
  if (v.kind !== 'object') throw new JSONError('not_object', 'the value is not an object', []);
  return serialize(v);
}

// ---- the envelope ---------------------------------------------------------------------------

export const MAX_ENVELOPE_BYTES = 64 << 10;
const FIELDS = ['v', 'account', 'action', 'target', 'request', 'occurrence', 'source', 'reply_to', 'not_before', 'expires_at'];
const isControl = (s) => /[\u0000-\u001f\u007f-\u009f]/.test(s);

function rejectJSON(e) {
  if (!(e instanceof JSONError)) throw e;
  const inRequest = e.path[0] === 'request';
  if (e.code === 'invalid_utf8') return new RejectError('invalid_utf8', e.message);
  if (e.code === 'duplicate_key') return new RejectError('duplicate_field', e.message);
  if ((e.code === 'inexact_number' || e.code === 'too_deep') && inRequest) return new RejectError('invalid_request', e.message);
  return new RejectError('malformed_json', e.message);
}

function stringField(obj, name, required, reason, maxBytes) {
  const v = obj.get(name);
  if (v === undefined) {
    if (required) throw new RejectError('missing_field', `missing field ${name}`);
    return '';
  }
  if (v.kind !== 'string') throw new RejectError(reason, `${name} must be a string`);
  if (required && v.value === '') throw new RejectError(reason, `${name} is empty`);
  if (utf8.encode(v.value).length > maxBytes) throw new RejectError(reason, `${name} is over ${maxBytes} bytes`);
  if (isControl(v.value)) throw new RejectError(reason, `${name} has a control character`);
  return v.value;
}

/**
 * parseEnvelope validates an intent message (bytes or string) and returns its canonical parts
 * {account, action, target, request, occurrence, source}, or throws a RejectError. source.id is
 * returned canonical (canonicalSourceID), as ingest stores it; source is no part of the delivery
 * key.
 */
export function parseEnvelope(input) {
  const bytes = toBytes(input);
  if (bytes.length > MAX_ENVELOPE_BYTES) throw new RejectError('too_large', 'over 64 KiB');
  for (let i = 0; i < bytes.length;) {
    const n = validSequenceAt(bytes, i);
    if (n === 0) throw new RejectError('invalid_utf8', `byte ${i} is not valid UTF-8`);
    i += n;
  }
  let root;
  try {
    root = parseJSON(bytes);
  } catch (e) {
    throw rejectJSON(e);
  }
  if (root.kind !== 'object') throw new RejectError('not_object', 'the message is not an object');
  const obj = new Map(root.value);
  // Go names the unknown member that comes first in the message; its position is not kept
  // here, so the first in canonical order is named (the reason is the same).
  for (const [k] of root.value) if (!FIELDS.includes(k)) throw new RejectError('unknown_field', `unknown field ${k}`);
  const v = obj.get('v');
  if (v === undefined) throw new RejectError('missing_field', 'missing field v');
  if (v.kind !== 'number' || v.value !== 1) throw new RejectError('unsupported_version', 'v must be the number 1');
  const account = stringField(obj, 'account', true, 'invalid_account', 128);
  const action = stringField(obj, 'action', true, 'invalid_action', 32);
  if (!/^[a-z][a-z0-9_]*$/.test(action)) throw new RejectError('invalid_action', 'action does not match [a-z][a-z0-9_]{0,31}');
  const target = stringField(obj, 'target', false, 'invalid_target', 1024);
  const req = obj.get('request');
  if (req === undefined) throw new RejectError('missing_field', 'missing field request');
  if (req.kind !== 'object') throw new RejectError('invalid_request', 'request must be an object');
  const members = req.value.map(([k, x]) => {
    if (k !== 'text') return [k, x];
    if (x.kind !== 'string') throw new RejectError('invalid_request', 'request.text must be a string');
    return [k, { kind: 'string', value: normalizeText(x.value) }];
  });
  const request = serialize({ kind: 'object', value: members });
  const occurrence = stringField(obj, 'occurrence', false, 'invalid_occurrence', 128);
  let source = null;
  const src = obj.get('source');
  if (src !== undefined) {
    if (src.kind !== 'object') throw new RejectError('invalid_source', 'source must be an object');
    for (const [k] of src.value) if (k !== 'id' && k !== 'version') throw new RejectError('unknown_field', `unknown field ${k} in source`);
    const s = new Map(src.value);
    const id = s.get('id');
    if (id === undefined) throw new RejectError('missing_field', 'missing field source.id');
    if (id.kind !== 'string') throw new RejectError('invalid_source', 'source.id must be a string');
    let canonical;
    try {
      canonical = canonicalSourceID(id.value);
    } catch (err) {
      if (!(err instanceof SourceIDError)) throw err;
      throw new RejectError('invalid_source', `source.id: ${err.message}`);
    }
    if (isControl(canonical) || utf8.encode(canonical).length > 2048) throw new RejectError('invalid_source', 'bad source.id');
    const ver = s.get('version');
    if (ver === undefined) throw new RejectError('missing_field', 'missing field source.version');
    if (ver.kind !== 'string' || !/^sv1:[0-9a-f]{64}$/.test(ver.value) || /^sv1:0{64}$/.test(ver.value)) throw new RejectError('invalid_source', 'bad source.version');
    source = { id: canonical, version: ver.value };
  }
  let replyTo = '';
  const rt = obj.get('reply_to');
  if (rt !== undefined) {
    if (rt.kind !== 'string' || !/^dk1:[0-9a-f]{64}$/.test(rt.value) || /^dk1:0{64}$/.test(rt.value)) throw new RejectError('invalid_target', 'bad reply_to');
    if (target !== '') throw new RejectError('invalid_target', 'reply_to and target are both given');
    replyTo = rt.value;
  }
  const e = { account, action, target, request, occurrence, source, replyTo };
  if (replyTo !== '' && deliveryKey(e) === replyTo) throw new RejectError('invalid_target', "reply_to is the intent's own key");
  const notBefore = timeField(obj, 'not_before');
  const expiresAt = timeField(obj, 'expires_at');
  if (notBefore !== null && expiresAt !== null && expiresAt.micros <= notBefore.micros) {
    throw new RejectError('invalid_time', 'expires_at is not after not_before');
  }
  e.notBefore = notBefore && notBefore.text;
  e.expiresAt = expiresAt && expiresAt.text;
  if (utf8.encode(canonicalEnvelope(e)).length > MAX_ENVELOPE_BYTES) throw new RejectError('too_large', 'canonical form over 64 KiB');
  return e;
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|([+-])(\d{2}):(\d{2}))$/;

/**
 * timeField reads an optional RFC 3339 member as Go's ParseEnvelope does: null when absent,
 * else { micros (BigInt, since the epoch, truncated to the microsecond), text (the canonical
 * spelling: UTC, trailing zeros of the fraction dropped) }.
 */
function timeField(obj, name) {
  const v = obj.get(name);
  if (v === undefined) return null;
  if (v.kind !== 'string') throw new RejectError('invalid_time', `${name} must be an RFC 3339 string`);
  const m = RFC3339.exec(v.value);
  if (!m) throw new RejectError('invalid_time', `${name} is not an RFC 3339 time`);
  const [Y, M, D, h, mi, s] = m.slice(1, 7).map(Number);
  const days = new Date(Date.UTC(Y, M, 0)).getUTCDate();
  if (M < 1 || M > 12 || D < 1 || D > days || h > 23 || mi > 59 || s > 59) {
    throw new RejectError('invalid_time', `${name} is not an RFC 3339 time`);
  }
  let offset = 0;
  if (m[8] !== 'Z') {
    const oh = Number(m[10]), om = Number(m[11]);
    if (oh > 23 || om > 59) throw new RejectError('invalid_time', `${name} is not an RFC 3339 time`);
    offset = (m[9] === '-' ? -1 : 1) * (oh * 60 + om) * 60;
  }
  if (Y < 2000) throw new RejectError('invalid_time', `${name} is before the year 2000`);
  const d = new Date(0);
  d.setUTCFullYear(Y, M - 1, D);
  d.setUTCHours(h, mi, s, 0);
  const seconds = BigInt(d.getTime() / 1000 - offset);
  const frac = BigInt((m[7] || '').padEnd(6, '0').slice(0, 6));
  const micros = seconds * 1000000n + frac;
  const u = new Date(Number(seconds) * 1000);
  const pad = (n, w) => String(n).padStart(w, '0');
  let text = `${pad(u.getUTCFullYear(), 4)}-${pad(u.getUTCMonth() + 1, 2)}-${pad(u.getUTCDate(), 2)}T` +
    `${pad(u.getUTCHours(), 2)}:${pad(u.getUTCMinutes(), 2)}:${pad(u.getUTCSeconds(), 2)}`;
  if (frac !== 0n) text += '.' + pad(frac, 6).replace(/0+$/, '');
  return { micros, text: text + 'Z' };
}

/** canonicalEnvelope is the envelope as RFC 8785 JSON, target and occurrence always present. */
export function canonicalEnvelope(e) {
  const q = JSON.stringify;
  const source = e.source ? `,"source":{"id":${q(e.source.id)},"version":${q(e.source.version)}}` : '';
  const replyTo = e.replyTo ? `,"reply_to":${q(e.replyTo)}` : '';
  const expires = e.expiresAt ? `,"expires_at":${q(e.expiresAt)}` : '';
  const notBefore = e.notBefore ? `,"not_before":${q(e.notBefore)}` : '';
  return `{"account":${q(e.account)},"action":${q(e.action)}${expires}${notBefore},"occurrence":${q(e.occurrence)}${replyTo},"request":${e.request}${source},"target":${q(e.target)},"v":1}`;
}

/**
 * deliveryKey is dk1: over account, action, target, the canonical request and occurrence, and,
 * for a reply, the 32 bytes of its reply_to key as a sixth field.
 */
export function deliveryKey(e) {
  const fields = [e.account, e.action, e.target, e.request, e.occurrence].map((f) => utf8.encode(f));
  if (e.replyTo) fields.push(Buffer.from(e.replyTo.slice(4), 'hex'));
  return 'dk1:' + hashFields('atmost/delivery-key/v1', fields);
}

/** envelopeText is the request's normalized top-level text, or null when it has none. */
export function envelopeText(e) {
  const t = new Map(parseJSON(e.request).value).get('text');
  return t ? t.value : null;
}

// ---- the source version ---------------------------------------------------------------------

/** A source id NewSourceVersion refuses: code empty_source_id or invalid_utf8. */
export class SourceIDError extends Error {
  constructor(code, detail) {
    super(`${code}: ${detail}`);
    this.code = code;
  }
}

/**
 * normalizeBody is pkg/identity's NormalizeBody: the body (a string, or bytes whose invalid
 * UTF-8 runs become one U+FFFD each) through normalizeText, then, line by line (LF only): each
 * run of White_Space inside a line becomes one U+0020, the line is trimmed, and each run of
 * blank lines becomes one blank line.
 */
export function normalizeBody(body) {
  const s = normalizeText(bodyText(body));
  let out = '';
  let blank = 0; // consecutive blank lines written so far
  s.split('\n').forEach((line, i) => {
    line = line.split(SPACE_RUN).filter((f) => f !== '').join(' ');
    if (line === '') {
      blank++;
      if (blank > 1) return;
    } else {
      blank = 0;
    }
    if (i > 0) out += '\n';
    out += line;
  });
  return out;
}

const SPACE_RUN = new RegExp(`[${WHITE_SPACE}]+`, 'u');

// bodyText is the text Go's NormalizeBody sees of a body: a string as its UTF-8 bytes would
// decode (a lone surrogate, which TextEncoder writes as U+FFFD, is U+FFFD), bytes decoded as
// strings.ToValidUTF8 does.
function bodyText(body) {
  return typeof body === 'string' ? body.toWellFormed() : decodeUTF8(body);
}

/** rawHash is raw1: and the plain SHA-256 of the exact bytes (a string as UTF-8). */
export function rawHash(body) {
  return 'raw1:' + createHash('sha256').update(toBytes(body)).digest('hex');
}

/**
 * canonicalSourceID is pkg/identity's CanonicalSourceID: the id (a string, or UTF-8 bytes)
 * in NFC with White_Space trimmed at both ends; if that is an absolute http or https URL with a
 * host, as Go's net/url.Parse decides it, the scheme and the host's ASCII letters are
 * lower-cased, a default or empty port and the fragment removed, and an empty path made "/".
 * Throws a SourceIDError: invalid_utf8 (bytes that are not UTF-8, a string with a lone
 * surrogate), empty_source_id (nothing left after trimming).
 */
export function canonicalSourceID(id) {
  let s;
  if (typeof id === 'string') {
    if (!id.isWellFormed()) throw new SourceIDError('invalid_utf8', 'the source id has a lone surrogate');
    s = id;
  } else {
    try {
      s = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(id);
    } catch {
      throw new SourceIDError('invalid_utf8', 'the source id is not valid UTF-8');
    }
  }
  s = s.normalize('NFC').replace(TRIM, '');
  if (s === '') throw new SourceIDError('empty_source_id', 'the source id is empty after trimming');
  return canonicalHTTPURL(s);
}

/**
 * sourceVersion is pkg/identity's NewSourceVersion: {id, version, rawHash}, id the canonical
 * source id, version sv1: over "atmost/source-version/v1", id and normalizeBody(body), rawHash
 * that of body's exact bytes. The id and version are what an envelope's source carries.
 */
export function sourceVersion(sourceID, body) {
  const id = canonicalSourceID(sourceID);
  const version = 'sv1:' + hashFields('atmost/source-version/v1', [utf8.encode(id), utf8.encode(normalizeBody(body))]);
  return { id, version, rawHash: rawHash(body) };
}

// What follows is Go's (1.26) net/url.Parse, as far as canonicalHTTPURL's decision rests on it:
// whether it accepts a string, its Scheme, Opaque and Host, and Host's port. It works, as Go
// does, on bytes: a "binary" string of one char per UTF-8 byte, so that every index, every
// "byte < 0x80" and every %-escape is Go's.

const binary = (s) => Buffer.from(s, 'utf8').toString('latin1');
const fromBinary = (b) => Buffer.from(b, 'latin1').toString('utf8');
const lowerASCII = (b) => b.replace(/[A-Z]/g, (c) => c.toLowerCase());
const isHex = (c) => /^[0-9a-fA-F]$/.test(c);

// canonicalHTTPURL rewrites s in place, as pkg/identity's canonicalHTTPURL does.
function canonicalHTTPURL(s) {
  const b = binary(s);
  const u = parseURL(b);
  if (u === null || u.opaque !== '' || u.host === '') return s;
  const scheme = lowerASCII(u.scheme);
  if (scheme !== 'http' && scheme !== 'https') return s;
  if (!b.slice(u.scheme.length).startsWith('://')) return s;
  let rest = b.slice(u.scheme.length + 3);
  const hash = rest.indexOf('#');
  if (hash >= 0) rest = rest.slice(0, hash);
  let authEnd = rest.search(/[/?]/);
  if (authEnd < 0) authEnd = rest.length;
  const authority = rest.slice(0, authEnd);
  let tail = rest.slice(authEnd);
  let userinfo = '';
  let hostport = authority;
  const at = authority.lastIndexOf('@');
  if (at >= 0) {
    userinfo = authority.slice(0, at + 1);
    hostport = authority.slice(at + 1);
  }
  hostport = lowerASCII(hostport);
  const port = hostPort(u.host);
  if (port === '' || (scheme === 'http' && port === '80') || (scheme === 'https' && port === '443')) {
    if (hostport.endsWith(':' + port)) hostport = hostport.slice(0, hostport.length - port.length - 1);
  }
  if (tail === '' || tail[0] === '?') tail = '/' + tail;
  return fromBinary(scheme + '://' + userinfo + hostport + tail);
}

// parseURL is url.Parse: {scheme, opaque, host} (host unescaped), or null where Go errs.
function parseURL(raw) {
  const hash = raw.indexOf('#');
  const u = parse(hash < 0 ? raw : raw.slice(0, hash));
  if (u === null) return null;
  if (hash >= 0 && unescape(raw.slice(hash + 1), FRAGMENT) === null) return null;
  return u;
}

const PATH = 'path';
const HOST = 'host';
const ZONE = 'zone';
const USERINFO = 'userinfo';
const FRAGMENT = 'fragment';

// parse is url.parse(rawURL, false).
function parse(raw) {
  // Any ASCII control byte, before the fragment: "invalid control character in URL".
  if (/[\x00-\x1f\x7f]/.test(raw)) return null;
  if (raw === '*') return { scheme: '', opaque: '', host: '' };
  const sch = getScheme(raw);
  if (sch === null) return null;
  const scheme = lowerASCII(sch.scheme);
  let rest = sch.rest;
  if (rest.endsWith('?') && rest.indexOf('?') === rest.length - 1) {
    rest = rest.slice(0, -1);
  } else {
    const q = rest.indexOf('?');
    if (q >= 0) rest = rest.slice(0, q);
  }
  if (!rest.startsWith('/')) {
    // A rootless path after a scheme is opaque.
    if (scheme !== '') return { scheme, opaque: rest, host: '' };
    const slash = rest.indexOf('/');
    if ((slash < 0 ? rest : rest.slice(0, slash)).includes(':')) return null;
  }
  let host = '';
  if ((scheme !== '' || !rest.startsWith('///')) && rest.startsWith('//')) {
    let authority = rest.slice(2);
    rest = '';
    const slash = authority.indexOf('/');
    if (slash >= 0) {
      rest = authority.slice(slash);
      authority = authority.slice(0, slash);
    }
    host = parseAuthority(scheme, authority);
    if (host === null) return null;
  }
  if (unescape(rest, PATH) === null) return null;
  return { scheme, opaque: '', host };
}

// getScheme is url.getScheme: {scheme, rest}, or null for a leading ':'.
function getScheme(raw) {
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i];
    if (/[a-zA-Z]/.test(c)) continue;
    if (/[0-9+\-.]/.test(c)) {
      if (i === 0) return { scheme: '', rest: raw };
      continue;
    }
    if (c === ':') {
      if (i === 0) return null; // missing protocol scheme
      return { scheme: raw.slice(0, i), rest: raw.slice(i + 1) };
    }
    return { scheme: '', rest: raw };
  }
  return { scheme: '', rest: raw };
}

// parseAuthority is url.parseAuthority: the unescaped host, or null.
function parseAuthority(scheme, authority) {
  const at = authority.lastIndexOf('@');
  const host = parseHost(scheme, at < 0 ? authority : authority.slice(at + 1));
  if (host === null || at < 0) return host;
  const userinfo = authority.slice(0, at);
  // validUserinfo: RFC 3986's userinfo characters and '@'; any non-ASCII rune is refused.
  if (!/^[A-Za-z0-9\-._:~!$&'()*+,;=%@]*$/.test(userinfo)) return null;
  const colon = userinfo.indexOf(':');
  const parts = colon < 0 ? [userinfo] : [userinfo.slice(0, colon), userinfo.slice(colon + 1)];
  for (const p of parts) if (unescape(p, USERINFO) === null) return null;
  return host;
}

// parseHost is url.parseHost: host[:port] unescaped, or null.
function parseHost(scheme, host) {
  const open = host.lastIndexOf('[');
  if (open > 0) return null; // invalid IP-literal
  if (open === 0) {
    const close = host.lastIndexOf(']');
    if (close < 0) return null; // missing ']' in host
    const colonPort = host.slice(close + 1);
    if (!validOptionalPort(colonPort)) return null;
    const port = unescape(colonPort, HOST);
    if (port === null) return null;
    const hostname = host.slice(1, close);
    let unescaped;
    const zone = hostname.indexOf('%25');
    if (zone >= 0) {
      const h = unescape(hostname.slice(0, zone), HOST);
      const z = unescape(hostname.slice(zone), ZONE);
      if (h === null || z === null) return null;
      unescaped = h + z;
    } else {
      unescaped = unescape(hostname, HOST);
      if (unescaped === null) return null;
    }
    // Only an IPv6 address goes in brackets (an IPv4-mapped one too, not an IPv4 one).
    if (parseAddr(unescaped) !== 6) return null;
    return '[' + unescaped + ']' + port;
  }
  const first = host.indexOf(':');
  if (first !== -1) {
    let i = first;
    // Go 1.26 (urlstrictcolons=1, the default for go.mod's go 1.26) refuses a second colon
    // in an http(s) host; other schemes take the last colon as the port's.
    if (host.lastIndexOf(':') !== first && scheme !== 'http' && scheme !== 'https') i = host.lastIndexOf(':');
    if (!validOptionalPort(host.slice(i))) return null;
  }
  return unescape(host, HOST);
}

// validOptionalPort: "" or ':' and ASCII digits.
function validOptionalPort(port) {
  return /^(:[0-9]*)?$/.test(port);
}

// hostPort is URL.Port: the digits after Host's last colon, if they are all digits, else "".
function hostPort(host) {
  const colon = host.lastIndexOf(':');
  return colon !== -1 && validOptionalPort(host.slice(colon)) ? host.slice(colon + 1) : '';
}

// hostByte reports whether the ASCII byte c may stand unescaped in a host or zone
// (!shouldEscape(c, encodeHost)): letters, digits, -_.~ and !$&'()*+,;=:[]<>".
function hostByte(c) {
  return /^[A-Za-z0-9\-_.~!$&'()*+,;=:[\]<>"]$/.test(c);
}

// unescape is url.unescape in the given mode: the unescaped string, or null where Go errs
// (a '%' without two hex digits; in a host an escaped ASCII byte other than %25, or an
// unescaped ASCII byte a host may not hold; in a zone, an escape of such a byte).
function unescape(s, mode) {
  let out = '';
  for (let i = 0; i < s.length;) {
    const c = s[i];
    if (c === '%') {
      if (i + 2 >= s.length || !isHex(s[i + 1]) || !isHex(s[i + 2])) return null;
      const v = parseInt(s.slice(i + 1, i + 3), 16);
      if (mode === HOST && v < 0x80 && s.slice(i, i + 3) !== '%25') return null;
      if (mode === ZONE && s.slice(i, i + 3) !== '%25' && v !== 0x20 && !(v < 0x80 && hostByte(String.fromCharCode(v)))) return null;
      out += String.fromCharCode(v);
      i += 3;
      continue;
    }
    if ((mode === HOST || mode === ZONE) && c.charCodeAt(0) < 0x80 && !hostByte(c)) return null;
    out += c;
    i++;
  }
  return out;
}

// parseAddr is net/netip.ParseAddr, for the brackets of a host: 4 or 6 for an address it
// accepts (IPv4, IPv6 with an optional non-empty %zone), null for one it refuses.
function parseAddr(s) {
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '.') return parseIPv4Fields(s, 0, s.length) ? 4 : null;
    if (s[i] === ':') return parseIPv6(s) ? 6 : null;
    if (s[i] === '%') return null; // missing IPv6 address
  }
  return null;
}

// parseIPv4Fields is netip's: in[off:end] is four decimal octets, no leading zeros, none > 255.
function parseIPv4Fields(inp, off, end) {
  const s = inp.slice(off, end);
  let val = 0;
  let pos = 0;
  let digLen = 0;
  for (let i = 0; i < s.length; i++) {
    if (s[i] >= '0' && s[i] <= '9') {
      if (digLen === 1 && val === 0) return false;
      val = val * 10 + Number(s[i]);
      digLen++;
      if (val > 255) return false;
    } else if (s[i] === '.') {
      if (i === 0 || i === s.length - 1 || s[i - 1] === '.') return false;
      if (pos === 3) return false;
      pos++;
      val = 0;
      digLen = 0;
    } else {
      return false;
    }
  }
  return pos === 3;
}

// parseIPv6 is netip's parseIPv6, reporting only whether it accepts inp.
function parseIPv6(inp) {
  let s = inp;
  let zone = '';
  const pct = s.indexOf('%');
  if (pct !== -1) {
    zone = s.slice(pct + 1);
    s = s.slice(0, pct);
    if (zone === '') return false;
  }
  let ellipsis = -1;
  if (s.length >= 2 && s[0] === ':' && s[1] === ':') {
    ellipsis = 0;
    s = s.slice(2);
    if (s.length === 0) return true;
  }
  let i = 0;
  while (i < 16) {
    let off = 0;
    let acc = 0;
    for (; off < s.length; off++) {
      if (!isHex(s[off])) break;
      acc = acc * 16 + parseInt(s[off], 16);
      if (off > 3) return false; // more than 4 digits in a group
      if (acc > 0xffff) return false;
    }
    if (off === 0) return false;
    if (off < s.length && s[off] === '.') {
      // An embedded IPv4 address, in place of the last two groups.
      if (ellipsis < 0 && i !== 12) return false;
      if (i + 4 > 16) return false;
      let end = inp.length;
      if (zone.length > 0) end -= zone.length + 1;
      if (!parseIPv4Fields(inp, end - s.length, end)) return false;
      s = '';
      i += 4;
      break;
    }
    i += 2;
    s = s.slice(off);
    if (s.length === 0) break;
    if (s[0] !== ':' || s.length === 1) return false;
    s = s.slice(1);
    if (s[0] === ':') {
      if (ellipsis >= 0) return false; // multiple ::
      ellipsis = i;
      s = s.slice(1);
      if (s.length === 0) break;
    }
  }
  if (s.length !== 0) return false;
  if (i < 16) return ellipsis >= 0;
  return ellipsis < 0; // :: must stand for at least one group of zeros
}
