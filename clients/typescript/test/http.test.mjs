// The TypeScript client's HTTP side against ingest's HTTP API (docs/http-api.yaml), which
// client_test.go serves with --http-api and a producer token bound to ATMOST_TEST_ACCOUNT only:
// ATMOST_HTTP_URL and ATMOST_HTTP_TOKEN name them.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HttpClient, HttpApiError, NotFoundError, deliveryKey, settled } from '../dist/index.js';

const url = process.env.ATMOST_HTTP_URL;
const token = process.env.ATMOST_HTTP_TOKEN;
const account = process.env.ATMOST_TEST_ACCOUNT;
const other = process.env.ATMOST_TEST_OTHER_ACCOUNT;
assert.ok(url && token && account && other, 'ATMOST_HTTP_URL, ATMOST_HTTP_TOKEN and the test accounts name the HTTP API to test against (client_test.go sets them); the token acts for ATMOST_TEST_ACCOUNT and ts-nobody, an account nobody configured');

const run = `${process.pid}-${Date.now()}`;
const post = (text, acct = account) => ({ account: acct, action: 'post', request: { text: `${text} ${run}` } });

test('publish over HTTP answers the key, the sequence and duplicate, and await learns the outcome', async () => {
  const c = new HttpClient({ url, token });
  const intent = post('over HTTP');
  const r = await c.publish(intent);
  assert.equal(r.key, deliveryKey(intent));
  assert.ok(r.seq > 0);
  assert.equal(r.duplicate, false);
  const again = await c.publish(intent);
  assert.equal(again.key, r.key);
  assert.equal(again.duplicate, true);
  const o = await c.await(r.key, { seq: r.seq, signal: AbortSignal.timeout(60_000) });
  assert.equal(o.state, 'published', JSON.stringify(o));
  assert.ok(o.objectId);
  assert.ok(settled(o));
});

test('a token acts only for its accounts', async () => {
  const c = new HttpClient({ url, token });
  await assert.rejects(c.publish(post('not mine', other)), (e) => e instanceof HttpApiError && e.status === 403 && e.code === 'account_not_bound');
  await assert.rejects(c.status(deliveryKey(post('never published'))), NotFoundError);
  const nobody = new HttpClient({ url, token: 'atmost_pr_' + 'A'.repeat(43) });
  await assert.rejects(nobody.publish(post('no token')), (e) => e instanceof HttpApiError && e.status === 401 && e.code === 'unauthorized');
  await assert.rejects(nobody.events(account), (e) => e instanceof HttpApiError && e.status === 401);
  await assert.rejects(c.events(other), (e) => e instanceof HttpApiError && e.status === 403 && e.code === 'account_not_bound');
});

test("ingest's refusal is typed: its code is the reject reason, with the remedy, the sequence and the key", async () => {
  const c = new HttpClient({ url, token });
  const intent = post('for nobody', 'ts-nobody');
  await assert.rejects(c.publish(intent), (e) => e instanceof HttpApiError && e.status === 422 && e.code === 'unknown_account' &&
    /atmost rejects replay/.test(e.remedy) && e.seq > 0 && e.key === deliveryKey(intent));
  // The refusal is an outcome too, read with its sequence.
  let seq;
  try {
    await c.publish(intent);
  } catch (e) {
    seq = e.seq;
  }
  const o = await c.status(deliveryKey(intent), { seq });
  assert.equal(o.rejected?.reason, 'unknown_account', JSON.stringify(o));
});

test('the events of an account come as server-sent events, and resume after Last-Event-ID', async () => {
  const c = new HttpClient({ url, token });
  // Bounded: a stream that never brings the event fails the test instead of hanging it.
  const until = async (stream, key) => {
    for await (const e of stream) if (e.event.delivery_key === key && e.event.to === 'published') return e;
    return undefined;
  };
  const ac = new AbortController();
  const stream = await c.events(account, { signal: AbortSignal.any([ac.signal, AbortSignal.timeout(30_000)]) });
  const r = await c.publish(post('streamed'));
  const seen = await until(stream, r.key);
  ac.abort();
  assert.ok(seen, 'the published event came');
  assert.equal(seen.event.account, account);
  assert.match(seen.id, /^[0-9]+$/);

  // Resumed after it: only what came later.
  const r2 = await c.publish(post('streamed again'));
  const ac2 = new AbortController();
  const resumed = await c.events(account, { lastEventId: seen.id, signal: AbortSignal.any([ac2.signal, AbortSignal.timeout(30_000)]) });
  const ids = [];
  for await (const e of resumed) {
    ids.push(e.id);
    if (e.event.delivery_key === r2.key && e.event.to === 'published') break;
  }
  ac2.abort();
  assert.ok(ids.length > 0 && ids.every((id) => BigInt(id) > BigInt(seen.id)), ids.join(','));
  assert.ok(ids.length > 0);
});

test('DELETE cancels an intent not yet sent; another token finds nothing', async () => {
  const c = new HttpClient({ url, token });
  const r = await c.publish({ ...post('cancel over HTTP'), notBefore: new Date(Date.now() + 3_600_000) });
  // Stored: status answers (it waits in pending until not_before, an hour away).
  for (let i = 0; ; i++) {
    try {
      assert.equal((await c.status(r.key)).state, 'pending');
      break;
    } catch (e) {
      if (!(e instanceof NotFoundError) || i > 300) throw e;
      await new Promise((ok) => setTimeout(ok, 100));
    }
  }
  const res = await c.cancel(r.key);
  assert.equal(res.cancelled, true);
  assert.equal(res.state, 'parked');
  assert.equal(res.reason, 'cancelled');
  await assert.rejects(c.cancel(deliveryKey(post('never published'))), NotFoundError);
});
