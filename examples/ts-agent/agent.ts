// An agent written in TypeScript that posts one text through atmost, at most once: it publishes
// the intent with @atmost/client, awaits its outcome and prints it. Publishing again after an
// unknown outcome is safe: the same intent has the same delivery key. How to run it: README.md.

import { parseArgs } from 'node:util';
import { connect } from '@nats-io/transport-node';
import { Client, MaybePublishedError, RejectError, type Intent, type Receipt } from '@atmost/client';

const { values } = parseArgs({
  options: {
    'nats-url': { type: 'string', default: process.env.ATMOST_NATS_URL || 'nats://127.0.0.1:4222' },
    account: { type: 'string' },
    text: { type: 'string' },
    occurrence: { type: 'string', default: '' },
    timeout: { type: 'string', default: '60' },
  },
});
if (!values.account || !values.text) {
  console.error('usage: node dist/agent.js --account ACCOUNT --text TEXT [--occurrence O] [--nats-url URL] [--timeout SECONDS]');
  process.exit(2);
}
const intent: Intent = { account: values.account, action: 'post', request: { text: values.text }, occurrence: values.occurrence };
const signal = AbortSignal.timeout(Number(values.timeout) * 1000);

const nc = await connect({ servers: values['nats-url'], name: 'atmost example agent (TypeScript)', maxReconnectAttempts: -1 });
try {
  const c = new Client(nc);
  let receipt: Receipt;
  for (;;) {
    try {
      receipt = await c.publish(intent, { signal });
      break;
    } catch (err) {
      // Unknown: the message may be stored. The same intent again is the remedy, never a new occurrence.
      if (err instanceof MaybePublishedError && !signal.aborted) {
        console.log('no acknowledgement; publishing again:', err.message);
        await new Promise((r) => setTimeout(r, 1000));
        continue;
      }
      throw err; // a RejectError names ingest's reason; anything else stored nothing
    }
  }
  console.log(`published ${receipt.key} as message ${receipt.seq} of ${receipt.stream} (duplicate: ${receipt.duplicate})`);

  const o = await c.await(receipt.account, receipt.key, { seq: receipt.seq, signal });
  if (o.rejected) throw o.rejected; // its remedy, when an operator can fix it
  console.log(`${o.state} ${o.reason} (${o.retry}) ${o.objectId ?? ''}`);
  if (o.state !== 'published') process.exitCode = 1;
} catch (err) {
  console.error('agent:', err instanceof RejectError ? `refused: ${err.message}` : (err as Error).message);
  process.exitCode = 1;
} finally {
  await nc.close();
}
