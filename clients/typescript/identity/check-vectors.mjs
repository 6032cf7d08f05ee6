// Holds identity.mjs to every case of testdata/identity-vectors.json: node check-vectors.mjs
// [path]. Prints each disagreement and exits 1 if there is one. pkg/identity's
// TestTheVectorsHoldInJavaScript runs it, so `make test` does.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as id from './identity.mjs';

const path = process.argv[2] ?? fileURLToPath(new URL('../../../testdata/identity-vectors.json', import.meta.url));
const vectors = JSON.parse(readFileSync(path, 'utf8'));
const bytes = (plain, hex) => (hex !== undefined ? Buffer.from(hex, 'hex') : Buffer.from(plain, 'utf8'));
const failures = [];
const checked = {};

function eq(v, what, got, want) {
  if (got !== want) failures.push(`${v.kind}/${v.name ?? ''}: ${what} is ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

function thrown(f) {
  try {
    f();
    return null;
  } catch (e) {
    if (e instanceof id.RejectError || e instanceof id.JSONError || e instanceof id.SourceIDError) return e;
    throw e;
  }
}

for (const v of vectors) {
  switch (v.kind) {
    case 'delivery_key': {
      const e = id.parseEnvelope(v.envelope);
      eq(v, 'delivery_key', id.deliveryKey(e), v.delivery_key);
      eq(v, 'canonical_request', e.request, v.canonical_request);
      eq(v, 'account_token', id.accountToken(e.account), v.account_token);
      const text = id.envelopeText(e);
      eq(v, 'text_hash', text === null ? null : id.textHash(text), v.text_hash);
      eq(v, 'canonical_envelope', id.canonicalEnvelope(e), v.canonical_envelope);
      break;
    }
    case 'key_header': {
      const key = id.deliveryKey(id.parseEnvelope(v.envelope));
      const stated = v.header.replace(/^[ \t]+|[ \t]+$/g, '');
      let reason = null;
      if (stated !== '' && !/^dk1:[0-9a-f]{64}$/.test(stated)) reason = 'invalid_key_header';
      else if (stated !== '' && stated !== key) reason = 'key_mismatch';
      eq(v, 'reason', reason, v.reason);
      break;
    }
    case 'envelope_rejection': {
      const e = thrown(() => id.parseEnvelope(bytes(v.envelope, v.envelope_hex)));
      eq(v, 'reason', e?.reason ?? 'accepted', v.reason);
      break;
    }
    case 'text_hash': {
      const text = v.text_hex !== undefined ? id.decodeUTF8(Buffer.from(v.text_hex, 'hex')) : v.text;
      eq(v, 'normalized', id.normalizeText(text), v.normalized);
      eq(v, 'text_hash', id.textHash(text), v.text_hash);
      break;
    }
    case 'claim':
      eq(v, 'claim_id', id.claimID(v.source_version, v.content), v.claim_id);
      break;
    case 'canonical_json':
      eq(v, 'output', id.canonicalJSON(v.input), v.output);
      break;
    case 'canonical_json_rejection': {
      const canon = v.object_required ? id.canonicalObject : id.canonicalJSON;
      const e = thrown(() => canon(bytes(v.input, v.input_hex)));
      eq(v, 'error', e?.code ?? 'accepted', v.error);
      break;
    }
    case 'account_token':
      eq(v, 'token', id.accountToken(bytes(v.account, v.account_hex)), v.token);
      break;
    case 'source_version': {
      const sourceID = bytes(v.source_id, v.source_id_hex);
      const body = bytes(v.body, v.body_hex);
      const sv = id.sourceVersion(sourceID, body);
      eq(v, 'canonical_source_id', id.canonicalSourceID(sourceID), v.canonical_source_id);
      eq(v, 'normalized_body', id.normalizeBody(body), v.normalized_body);
      eq(v, 'source_version', sv.version, v.source_version);
      eq(v, 'raw_hash', sv.rawHash, v.raw_hash);
      eq(v, 'id', sv.id, v.canonical_source_id);
      // A producer holds the id and the body as strings: the same answers from them.
      if (v.source_id !== undefined && v.body !== undefined) {
        const s = id.sourceVersion(v.source_id, v.body);
        eq(v, 'source_version of the strings', s.version, v.source_version);
        eq(v, 'raw_hash of the strings', s.rawHash, v.raw_hash);
        eq(v, 'canonical_source_id of the string', id.canonicalSourceID(v.source_id), v.canonical_source_id);
      }
      break;
    }
    case 'source_version_rejection': {
      const sourceID = bytes(v.source_id, v.source_id_hex);
      const e = thrown(() => id.sourceVersion(sourceID, v.body));
      eq(v, 'error', e?.code ?? 'accepted', v.error);
      eq(v, 'canonicalSourceID error', thrown(() => id.canonicalSourceID(sourceID))?.code ?? 'accepted', v.error);
      break;
    }
    default:
      failures.push(`unknown kind ${v.kind}`);
  }
  checked[v.kind] = (checked[v.kind] ?? 0) + 1;
}

for (const f of failures) console.log(f);
const total = Object.values(checked).reduce((a, b) => a + b, 0);
console.log(`checked ${total} of ${vectors.length} vectors ${JSON.stringify(checked)}, ${failures.length} disagreements`);
process.exit(failures.length === 0 ? 0 : 1);
