// The TypeScript client against a real atmost: clients/typescript/client_test.go (make test)
// starts JetStream, the ingest role with the outcome service, a dispatcher and the platform
// simulator, configures the accounts ATMOST_TEST_ACCOUNT and ATMOST_TEST_OTHER_ACCOUNT, and runs
// `node --test` here with ATMOST_NATS_URL pointing at them. Run alone without them, it fails.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager, AckPolicy } from '@nats-io/jetstream';
import {
  Client, RejectError, Rejection, MaybePublishedError, NotPublishedError, NotFoundError, AwaitAbortedError,
  deliveryKey, envelope, followFilters, settled, DELIVERY_KEY_HEADER, MSG_ID_HEADER, INTENTS_STREAM,
  sourceVersion, canonicalSourceID, normalizeBody, SourceIDError,
} from '../dist/index.js';

const url = process.env.ATMOST_NATS_URL;
const account = process.env.ATMOST_TEST_ACCOUNT;
const other = process.env.ATMOST_TEST_OTHER_ACCOUNT;
const vectorsPath = process.env.ATMOST_TEST_VECTORS ?? fileURLToPath(new URL('../../../testdata/identity-vectors.json', import.meta.url));
assert.ok(url && account && other, 'ATMOST_NATS_URL, ATMOST_TEST_ACCOUNT and ATMOST_TEST_OTHER_ACCOUNT name the atmost to test against (client_test.go sets them)');

// A text no other run of this suite used: the duplicate-text window is per account.
const run = `${process.pid}-${Date.now()}`;
const post = (text, extra = {}) => ({ account, action: 'post', request: { text: `${text} ${run}` }, ...extra });

async function withClient(cfg, f) {
  const nc = await connect({ servers: url });
  try {
    return await f(new Client(nc, cfg), nc);
  } finally {
    await nc.close();
  }
}

test('every identity vector holds in identity.mjs, the rule the client uses', () => {
  const here = fileURLToPath(new URL('../identity/check-vectors.mjs', import.meta.url));
  const out = execFileSync(process.execPath, [here, vectorsPath], { encoding: 'utf8' });
  assert.match(out, / 0 disagreements/);
});

test('an intent built from its fields has the key of every delivery_key vector', () => {
  const vectors = JSON.parse(readFileSync(vectorsPath, 'utf8')).filter((v) => v.kind === 'delivery_key');
  assert.ok(vectors.length > 20);
  for (const v of vectors) {
    const e = JSON.parse(v.envelope);
    const intent = {
      account: e.account, action: e.action, target: e.target, request: e.request, occurrence: e.occurrence, source: e.source, replyTo: e.reply_to,
      notBefore: e.not_before, expiresAt: e.expires_at,
    };
    const env = envelope(intent);
    assert.equal(env.key, v.delivery_key, v.name);
    assert.equal(env.parts.request, v.canonical_request, v.name);
    // What the client publishes is ingest's canonical form, a source id canonicalized too.
    assert.equal(env.canonical, v.canonical_envelope, v.name);
    // The request as JSON text the producer wrote, exactly as given, is the same intent.
    const raw = JSON.stringify(e.request);
    assert.equal(deliveryKey({ ...intent, request: raw }), v.delivery_key, v.name);
    assert.equal(deliveryKey({ ...intent, request: new TextEncoder().encode(raw) }), v.delivery_key, v.name);
  }
});

test('the client derives the source version of every source_version vector, and refuses the ids Go refuses', () => {
  const vectors = JSON.parse(readFileSync(vectorsPath, 'utf8'));
  const bytes = (plain, hex) => (hex !== undefined ? Buffer.from(hex, 'hex') : plain);
  const versions = vectors.filter((v) => v.kind === 'source_version');
  assert.ok(versions.length > 50);
  for (const v of versions) {
    const sv = sourceVersion(bytes(v.source_id, v.source_id_hex), bytes(v.body, v.body_hex));
    assert.deepEqual(sv, { id: v.canonical_source_id, version: v.source_version, rawHash: v.raw_hash }, v.name);
    assert.equal(normalizeBody(bytes(v.body, v.body_hex)), v.normalized_body, v.name);
  }
  const refused = vectors.filter((v) => v.kind === 'source_version_rejection');
  assert.ok(refused.length >= 4);
  for (const v of refused) {
    assert.throws(() => sourceVersion(bytes(v.source_id, v.source_id_hex), v.body), (e) => e instanceof SourceIDError && e.code === v.error, v.name);
  }
  // A source made from it goes into an intent as it is: the id is already canonical.
  const { id, version } = sourceVersion(' HTTPS://Example.ORG:443/a#top ', 'Title\n\n Some  text.');
  assert.equal(id, 'https://example.org/a');
  assert.equal(canonicalSourceID(id), id);
  const env = envelope({ account: 'a', action: 'post', request: { text: 'x' }, source: { id, version } });
  assert.deepEqual(env.parts.source, { id, version });
});

test('an intent ingest would refuse is refused before anything is sent, with its reason', () => {
  const reason = (i) => {
    try {
      envelope(i);
    } catch (e) {
      assert.ok(e instanceof RejectError, String(e));
      return e.reason;
    }
    return 'accepted';
  };
  assert.equal(reason({ account: '', action: 'post', request: {} }), 'missing_field');
  assert.equal(reason({ account: 'a', action: '', request: {} }), 'missing_field');
  assert.equal(reason({ account: 'a', action: 'Post', request: {} }), 'invalid_action');
  assert.equal(reason({ account: 'a'.repeat(129), action: 'post', request: {} }), 'invalid_account');
  assert.equal(reason({ account: 'a', action: 'post', request: [] }), 'invalid_request');
  assert.equal(reason({ account: 'a', action: 'post', request: { text: 1 } }), 'invalid_request');
  assert.equal(reason({ account: 'a', action: 'post', request: { n: 10n } }), 'invalid_request');
  assert.equal(reason({ account: 'a', action: 'post', request: '{"n":9007199254740993}' }), 'invalid_request');
  assert.equal(reason({ account: 'a', action: 'post', request: '{"a":1,"a":2}' }), 'duplicate_field');
  assert.equal(reason({ account: 'a', action: 'post', request: '{"a":1},"v":2' }), 'malformed_json', 'a request is one JSON value, never members of the envelope');
  assert.equal(reason({ account: 'a', action: 'post', request: { text: 'x\ud800' } }), 'invalid_utf8');
  assert.equal(reason({ account: 'a\ud800', action: 'post', request: {} }), 'invalid_utf8', 'a lone surrogate is refused, not hashed as U+FFFD');
  assert.equal(reason({ account: 'a', action: 'post', request: '{"text":"x\ud800"}' }), 'invalid_utf8', 'nor in request text');
  assert.equal(reason({ account: 'a', action: 'post', request: new Uint8Array([0x7b, 0xff, 0x7d]) }), 'invalid_utf8');
  assert.equal(reason({ account: 'a', action: 'post', request: {}, occurrence: 'x\n' }), 'invalid_occurrence');
  assert.equal(reason({ account: 'a', action: 'post', request: {}, source: { id: 'x', version: 'sv1:00' } }), 'invalid_source');
  // The text rule: NFC, line ends, White_Space trimmed (U+0085 is, U+FEFF is not).
  const k = (text) => deliveryKey({ account: 'a', action: 'post', request: { text } });
  assert.equal(k('\u0085 Cafe\u0301\r\n'), k('Café'));
  assert.notEqual(k('\ufeffCafé'), k('Café'));
});

test('publish sets the key as Nats-Msg-Id and Atmost-Delivery-Key, and publishing again is a duplicate', async () => {
  await withClient({}, async (c, nc) => {
    const intent = post('headers');
    const r = await c.publish(intent);
    assert.equal(r.key, deliveryKey(intent));
    assert.equal(r.account, account);
    assert.equal(r.stream, INTENTS_STREAM);
    assert.ok(r.seq > 0);
    assert.equal(r.duplicate, false);
    const again = await c.publish(intent);
    assert.deepEqual(again, { ...r, duplicate: true }, 'JetStream dropped the copy: the same message, no new one');

    const jsm = await jetstreamManager(nc);
    const m = await jsm.streams.getMessage(INTENTS_STREAM, { seq: r.seq });
    assert.equal(m.subject, `atmost.intent.${account}`);
    assert.equal(m.header.get(MSG_ID_HEADER), r.key);
    assert.equal(m.header.get(DELIVERY_KEY_HEADER), r.key);
    assert.equal(m.string(), envelope(intent).canonical, 'the canonical envelope is what is published');
  });
});

test('await returns on the event of the transition, not on its poll', async () => {
  // A poll of an hour: only the intent's events can make await ask again in time.
  await withClient({ pollInterval: 3_600_000 }, async (c) => {
    const r = await c.publish(post('awaited'));
    const o = await c.await(account, r.key, { seq: r.seq, signal: AbortSignal.timeout(60_000) });
    assert.equal(o.state, 'published', JSON.stringify(o));
    assert.equal(o.reason, 'published');
    assert.equal(o.retry, 'done');
    assert.equal(o.key, r.key);
    assert.ok(o.objectId, 'the platform id of what was created');
    assert.ok(o.seq >= 3);
    assert.ok(!Number.isNaN(Date.parse(o.updatedAt)));
    assert.equal(o.rejected, undefined);
    assert.ok(settled(o));
  });
});

test('status by sequence alone tells a producer its key; another account finds nothing', async () => {
  await withClient({}, async (c) => {
    const r = await c.publish(post('by sequence'));
    await c.await(account, r.key, { signal: AbortSignal.timeout(60_000), until: (o) => o.state !== undefined });
    const o = await c.status(account, null, { seq: r.seq });
    assert.equal(o.key, r.key);
    assert.equal(o.account, account);
    await assert.rejects(c.status(other, r.key), NotFoundError, "another account's intent is not found for this one");
    await assert.rejects(c.status(other, null, { seq: r.seq }), NotFoundError, "a sequence on another account's subject reveals nothing");
    await assert.rejects(c.status(account, deliveryKey(post('never published'))), NotFoundError);
  });
});

test('an intent for an account nobody configured is refused, with the remedy, as an outcome', async () => {
  await withClient({}, async (c) => {
    const r = await c.publish({ account: `nobody-${run}`, action: 'post', request: { text: 'for nobody' } });
    const o = await c.await(r.account, r.key, { seq: r.seq, signal: AbortSignal.timeout(60_000) });
    assert.ok(o.rejected instanceof Rejection, JSON.stringify(o));
    assert.ok(o.rejected instanceof Error);
    assert.equal(o.rejected.reason, 'unknown_account');
    assert.match(o.rejected.remedy, /atmost rejects replay --account nobody-/);
    assert.equal(o.state, undefined, 'a refusal carries no state, no zero values');
    assert.equal(o.seq, undefined);
    assert.equal(o.updatedAt, undefined);
    assert.ok(settled(o));
  });
});

test('await that is aborted says so and hands over the last outcome it read', async () => {
  await withClient({}, async (c) => {
    const key = deliveryKey(post('never published either'));
    await assert.rejects(c.await(account, key, { signal: AbortSignal.timeout(300) }), (e) => e instanceof AwaitAbortedError && e.last === undefined);
  });
});

test('a publish on a closed connection is certainly not stored; one without its answer may be', async () => {
  const nc = await connect({ servers: url });
  const c = new Client(nc);
  await nc.close();
  await assert.rejects(c.publish(post('closed')), NotPublishedError);
  await withClient({}, async (c) => {
    const ac = new AbortController();
    const p = c.publish(post('aborted while waiting'), { signal: ac.signal });
    ac.abort(new Error('the producer gave up'));
    await assert.rejects(p, (e) => e instanceof MaybePublishedError && e.maybePublished && e.key === deliveryKey(post('aborted while waiting')));
  });
});

test('follow hands each event over once, resumes after a restart, and keeps its start', async () => {
  await withClient({}, async (c) => {
    const durable = `ts-follow-${process.pid}`;
    const filters = followFilters({ accounts: [account], states: ['published'] });
    assert.deepEqual(filters, [`atmost.event.published.${account}`]);
    assert.throws(() => followFilters({ states: ['sent'] }), /not a state/);

    // Follows until it has seen want (or 15 s passed), and returns every event it was handed.
    const follow = async (want, cfg = {}) => {
      const ac = new AbortController();
      const got = [];
      const signal = AbortSignal.any([ac.signal, AbortSignal.timeout(15_000)]);
      await c.follow({ durable, accounts: [account], states: ['published'], signal, ...cfg }, (e) => {
        got.push(e);
        if (e.delivery_key === want) ac.abort();
      });
      return got;
    };
    const first = await c.publish(post('followed first'));
    const got = await follow(first.key, { deliverNew: false });
    const mine = got.filter((e) => e.delivery_key === first.key);
    assert.equal(mine.length, 1);
    assert.equal(mine[0].to, 'published');
    assert.equal(mine[0].account, account);
    assert.equal(mine[0].id, `ev1:${first.key.slice(4)}:${mine[0].seq}`);
    assert.equal(new Set(got.map((e) => e.id)).size, got.length, 'each event once');

    // Started again under the same name, with deliverNew now (JetStream cannot change a
    // consumer's start; follow keeps it): it resumes after what it acknowledged.
    const second = await c.publish(post('followed second'));
    const again = await follow(second.key, { deliverNew: true });
    assert.ok(again.some((e) => e.delivery_key === second.key));
    assert.ok(!again.some((e) => e.delivery_key === first.key), 'resumed after the first');

    // A handler that fails: follow rejects with its error, and the event comes again.
    const third = await c.publish(post('followed third'));
    await c.await(account, third.key, { signal: AbortSignal.timeout(60_000) });
    const boom = new Error('not now');
    await assert.rejects(c.follow({ durable, accounts: [account], states: ['published'] }, (e) => {
      if (e.delivery_key === third.key) throw boom;
    }), (e) => e === boom);
    const later = await follow(third.key);
    assert.ok(later.some((e) => e.delivery_key === third.key), 'the event its handler refused is delivered again');
  });
});

test("a bound follow reads the consumer an operator made, as it is", async () => {
  await withClient({}, async (c, nc) => {
    const durable = `ts-bound-${process.pid}`;
    // The operator's consumer (docs/producers.md#nats-accounts), created apart from the client.
    const jsm = await jetstreamManager(nc);
    await jsm.consumers.add('ATMOST_EVENTS', { durable_name: durable, filter_subject: `atmost.event.published.${account}`, ack_policy: AckPolicy.Explicit });
    await assert.rejects(c.follow({ durable, bind: true, accounts: [account] }, () => {}), /is bound/);
    const r = await c.publish(post('followed bound'));
    const ac = new AbortController();
    const signal = AbortSignal.any([ac.signal, AbortSignal.timeout(15_000)]);
    const got = [];
    await c.follow({ durable, bind: true, signal }, (e) => {
      got.push(e);
      if (e.delivery_key === r.key) ac.abort();
    });
    assert.ok(got.some((e) => e.delivery_key === r.key && e.to === 'published'));
    assert.ok(got.every((e) => e.to === 'published'), "the consumer's own filter decides");
    const info = await jsm.consumers.info('ATMOST_EVENTS', durable);
    assert.equal(info.config.filter_subject, `atmost.event.published.${account}`, 'nothing of it was changed');
    await assert.rejects(c.status(account, null), TypeError);
  });
});

test('not_before and expires_at are outside the key; cancel parks an intent not yet sent, and says so again', async () => {
  await withClient({}, async (c) => {
    const plain = post('scheduled then cancelled');
    const intent = { ...plain, notBefore: new Date(Date.now() + 3_600_000), expiresAt: new Date(Date.now() + 7_200_000).toISOString() };
    assert.equal(deliveryKey(intent), deliveryKey(plain), 'the times are no part of the key');
    assert.throws(() => envelope({ ...plain, notBefore: '2026-12-08T10:00:00Z', expiresAt: '2026-12-08T09:00:00Z' }),
      (e) => e instanceof RejectError && e.reason === 'invalid_time');
    const r = await c.publish(intent);
    const waiting = await c.await(account, r.key, { until: (o) => o.state === 'pending', signal: AbortSignal.timeout(30_000) });
    assert.equal(waiting.state, 'pending');
    for (let i = 0; i < 2; i++) {
      const res = await c.cancel(account, r.key);
      assert.deepEqual(res, { key: r.key, account, cancelled: true, state: 'parked', reason: 'cancelled', seq: res.seq });
    }
    await assert.rejects(c.cancel(other, r.key), NotFoundError);

    const stale = await c.publish(post('already stale', { expiresAt: new Date(Date.now() - 1000) }));
    const o = await c.await(account, stale.key, { signal: AbortSignal.timeout(60_000) });
    assert.equal(o.state, 'parked', JSON.stringify(o));
    assert.equal(o.reason, 'expired');
  });
});
