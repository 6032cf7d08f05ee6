// The NATS client: publish, status, await and follow, as pkg/client does them in Go.

import { headers, nanos, RequestError, type Msg, type NatsConnection } from '@nats-io/nats-core';
import {
  AckPolicy, DeliverPolicy, JetStreamApiCodes, JetStreamApiError, jetstream, jetstreamManager,
  type Consumer, type ConsumerConfig, type JetStreamClient, type JsMsg,
} from '@nats-io/jetstream';
import { accountEvents, cancelSubject, envelope, intentSubject, statusSubject, type Intent } from './intent.js';
import { parseCancelResult, parseEvent, parseOutcome, settled, STATES, type CancelResult, type Event, type Outcome, type State } from './outcome.js';

/** The stream producers publish intents to. */
export const INTENTS_STREAM = 'ATMOST_INTENTS';
/** The stream of every intent's transitions. */
export const EVENTS_STREAM = 'ATMOST_EVENTS';
/** The header in which a producer states the delivery key it computed; ingest checks it. */
export const DELIVERY_KEY_HEADER = 'Atmost-Delivery-Key';
/** JetStream's deduplication header; the client sets it to the delivery key. */
export const MSG_ID_HEADER = 'Nats-Msg-Id';

/** Tunes a Client; every field has a default. Durations are in milliseconds. */
export interface ClientConfig {
  /** How long a publish waits for JetStream's acknowledgement before MaybePublishedError. Default 5000. */
  ackTimeout?: number;
  /** Bounds one request to the outcome service. Default 2000. */
  statusTimeout?: number;
  /** How often await asks again while no event of its intent came. Default 2000. */
  pollInterval?: number;
  /**
   * The prefix under which the producer's NATS account imports its consumer's JetStream API
   * ("$JS.atmost.API" in docs/producers.md#nats-accounts); absent is $JS.API.
   */
  jetStreamAPI?: string;
}

/** JetStream's acknowledgement of one published intent: stored, not yet ingested. */
export interface Receipt {
  key: string;
  account: string;
  /** The message in JetStream; for a duplicate, the message stored first. */
  stream: string;
  seq: number;
  /** JetStream had stored a message with this key inside its duplicate window, and stored nothing new. */
  duplicate: boolean;
}

/**
 * A publish whose outcome is unknown (no acknowledgement in time, a lost connection, a server
 * error, an abort while waiting): the message may be stored, or not. The remedy is to publish
 * the same intent again, with the same occurrence: the delivery key makes a copy a duplicate.
 * A new occurrence instead may make two intents, two sends.
 */
export class MaybePublishedError extends Error {
  readonly maybePublished = true;
  readonly key: string;
  constructor(key: string, cause: unknown) {
    super(`atmost: ${key} may have been published (${String((cause as Error)?.message ?? cause)}): publish the same intent again (same occurrence), the delivery key dedupes it`, { cause });
    this.name = 'MaybePublishedError';
    this.key = key;
  }
}

/** A publish that certainly stored nothing; publishing the same intent again is as safe. */
export class NotPublishedError extends Error {
  readonly key: string;
  constructor(key: string, message: string, cause?: unknown) {
    super(`atmost: ${key} not published: ${message}`, { cause });
    this.name = 'NotPublishedError';
    this.key = key;
  }
}

/**
 * The ledger holds no such intent of that account. Shortly after a publish it means ingest has
 * not stored it yet: it never proves that nothing will be sent.
 */
export class NotFoundError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NotFoundError';
  }
}

/** Nothing answers on the status subject: no ingest serves it, or this connection may not ask. */
export class NoStatusServiceError extends Error {
  constructor(subject: string) {
    super(`atmost: no outcome service answers on ${subject}`);
    this.name = 'NoStatusServiceError';
  }
}

/** The outcome service answered with an error code other than 404 (400, 503). */
export class StatusServiceError extends Error {
  readonly code: string;
  constructor(code: string, description: string) {
    super(`atmost: the outcome service answered ${code}: ${description}`);
    this.name = 'StatusServiceError';
    this.code = code;
  }
}

/** await ended (its signal aborted) before the intent settled; last is the last outcome read. */
export class AwaitAbortedError extends Error {
  readonly last: Outcome | undefined;
  constructor(key: string, last: Outcome | undefined, cause: unknown) {
    super(`atmost: await ${key}: ${String((cause as Error)?.message ?? cause)}`, { cause });
    this.name = 'AwaitAbortedError';
    this.last = last;
  }
}

export interface StatusOptions {
  /**
   * The sequence in ATMOST_INTENTS of the message that carried the intent (Receipt.seq): an
   * intent ingest refused is then an outcome (rejected), and status without a key asks for the
   * intent of that message, whose outcome names its key.
   */
  seq?: number;
  signal?: AbortSignal;
}

export interface AwaitOptions extends StatusOptions {
  /** Return at the first outcome for which until is true instead of the first settled one. */
  until?: (o: Outcome) => boolean;
}

/** Which events follow hands over and where it resumes (FollowConfig of the Go client). */
export interface FollowConfig {
  /** The durable consumer's name on ATMOST_EVENTS ([A-Za-z0-9_-]); required. */
  durable: string;
  /** When not empty, only the events of these accounts. */
  accounts?: string[];
  /** When not empty, only the transitions into these states. */
  states?: State[];
  /**
   * A consumer this follow creates starts with the events published from now on. An existing
   * consumer keeps its position either way.
   */
  deliverNew?: boolean;
  /** How many events one fetch asks for. Default 100. */
  batch?: number;
  /** How long JetStream waits for an event's acknowledgement before it delivers it again (ms). Default 30000. */
  ackWait?: number;
  /** How many recent event ids follow keeps to hand each event over once. Default 100000. */
  remember?: number;
  /**
   * Read the consumer as it exists, never creating or changing it (a producer in a NATS account
   * of its own): accounts, states and deliverNew must then be unset.
   */
  bind?: boolean;
  signal?: AbortSignal;
}

const SERVICE_ERROR_CODE = 'Nats-Service-Error-Code';
const SERVICE_ERROR = 'Nats-Service-Error';
// JetStream's "duplicate message id is in process" (409): a clustered stream is storing another
// copy of this very intent, so it proves nothing was refused.
const ERR_DUPLICATE_IN_PROCESS = 10158;

/**
 * Client publishes intents, asks for their outcome and follows events on one NATS connection,
 * which the caller owns and closes.
 */
export class Client {
  readonly nc: NatsConnection;
  private readonly js: JetStreamClient;
  private readonly cfg: Required<Omit<ClientConfig, 'jetStreamAPI'>> & { jetStreamAPI: string | undefined };

  constructor(nc: NatsConnection, cfg: ClientConfig = {}) {
    this.cfg = {
      ackTimeout: cfg.ackTimeout ?? 5000,
      statusTimeout: cfg.statusTimeout ?? 2000,
      pollInterval: cfg.pollInterval ?? 2000,
      jetStreamAPI: cfg.jetStreamAPI,
    };
    if (!(this.cfg.ackTimeout > 0 && this.cfg.statusTimeout > 0 && this.cfg.pollInterval > 0)) {
      throw new RangeError(`atmost: configuration out of range: ${JSON.stringify(this.cfg)}`);
    }
    this.nc = nc;
    this.js = jetstream(nc, this.apiOptions());
  }

  private apiOptions() {
    return this.cfg.jetStreamAPI ? { apiPrefix: this.cfg.jetStreamAPI } : {};
  }

  /**
   * publish validates the intent with ingest's rules, publishes its canonical envelope on
   * atmost.intent.<account-token> with the delivery key as Nats-Msg-Id and as
   * Atmost-Delivery-Key, and waits for JetStream's acknowledgement. It throws a RejectError for
   * an intent ingest would refuse (nothing sent), a MaybePublishedError when nothing proves the
   * message was not stored, a NotPublishedError when it certainly was not.
   */
  async publish(intent: Intent, opts: { signal?: AbortSignal } = {}): Promise<Receipt> {
    const env = envelope(intent);
    const key = env.key;
    const subject = intentSubject(env.account);
    const data = new TextEncoder().encode(env.canonical);
    // What nats.js would refuse before writing a byte is decided here, so that an error from
    // the publish itself never has to be guessed at.
    if (this.nc.isClosed() || this.nc.isDraining()) throw new NotPublishedError(key, 'the connection is closed or draining');
    const max = this.nc.info?.max_payload;
    if (max !== undefined && data.length > max) throw new NotPublishedError(key, `${data.length} bytes exceed the server's max_payload ${max}`);
    if (opts.signal?.aborted) throw new NotPublishedError(key, 'aborted before it was sent', opts.signal.reason);
    const h = headers();
    // The key as message id: a second publication inside the duplicate window is dropped by
    // JetStream itself, and the header lets ingest check the key this client computed.
    h.set(MSG_ID_HEADER, key);
    h.set(DELIVERY_KEY_HEADER, key);
    const ack = this.js.publish(subject, data, { headers: h, timeout: this.cfg.ackTimeout });
    try {
      const pa = await abortable(ack, opts.signal);
      return { key, account: env.account, stream: pa.stream, seq: pa.seq, duplicate: pa.duplicate };
    } catch (err) {
      throw publishError(key, subject, err);
    }
  }

  /**
   * status asks the outcome service what became of the intent of account with key (or, with
   * key null, of the message at opts.seq). It throws NotFoundError, NoStatusServiceError,
   * StatusServiceError or the connection's error; asking again is always safe.
   */
  async status(account: string, key: string | null, opts: StatusOptions = {}): Promise<Outcome> {
    if (!key && !opts.seq) throw new TypeError('atmost: status needs a delivery key or the sequence of the message that carried it');
    const body: Record<string, unknown> = {};
    if (key) body.delivery_key = key;
    if (opts.seq) body.seq = opts.seq;
    const subject = statusSubject(account);
    let reply: Msg;
    try {
      reply = await abortable(this.nc.request(subject, JSON.stringify(body), { timeout: this.cfg.statusTimeout }), opts.signal);
    } catch (err) {
      if (err instanceof RequestError && err.isNoResponders()) throw new NoStatusServiceError(subject);
      throw err;
    }
    const code = reply.headers?.get(SERVICE_ERROR_CODE) ?? '';
    if (code === '404') throw new NotFoundError(`atmost: no intent ${key ?? `at seq ${opts.seq}`} of account ${JSON.stringify(account)} in the ledger`);
    if (code !== '') throw new StatusServiceError(code, reply.headers?.get(SERVICE_ERROR) ?? '');
    return parseOutcome(reply.string());
  }

  /**
   * cancel asks that the intent of account with key never be sent: it is parked cancelled if it
   * is not yet authorized, else the result says too late (cancelled false) and its state. One
   * statement in the ledger decides (docs/producers.md#cancelling-an-intent). It throws
   * NotFoundError (no such intent of this account), NoStatusServiceError (nothing answers),
   * StatusServiceError or the connection's error; cancelling again is always safe.
   */
  async cancel(account: string, key: string, opts: { signal?: AbortSignal } = {}): Promise<CancelResult> {
    const subject = cancelSubject(account);
    let reply: Msg;
    try {
      reply = await abortable(this.nc.request(subject, JSON.stringify({ delivery_key: key }), { timeout: this.cfg.statusTimeout }), opts.signal);
    } catch (err) {
      if (err instanceof RequestError && err.isNoResponders()) throw new NoStatusServiceError(subject);
      throw err;
    }
    const code = reply.headers?.get(SERVICE_ERROR_CODE) ?? '';
    if (code === '404') throw new NotFoundError(`atmost: no intent ${key} of account ${JSON.stringify(account)} in the ledger`);
    if (code !== '') throw new StatusServiceError(code, reply.headers?.get(SERVICE_ERROR) ?? '');
    return parseCancelResult(reply.string());
  }

  /**
   * await waits until the intent of account with key is settled (or opts.until says so) and
   * returns its outcome. It subscribes to the account's events first and asks status second, so
   * no transition falls between the two; each event of the intent makes it ask again, and so
   * does pollInterval passing without one (an event a disconnect lost). An intent not stored yet
   * is asked for again with a growing pause. When opts.signal aborts it throws an
   * AwaitAbortedError carrying the last outcome read; NoStatusServiceError at once.
   */
  async await(account: string, key: string, opts: AwaitOptions = {}): Promise<Outcome> {
    const done = opts.until ?? settled;
    const ofKey = 'ev1:' + key.replace(/^dk1:/, '') + ':';
    let woken = false;
    let wake: (() => void) | undefined;
    const sub = this.nc.subscribe(accountEvents(account), {
      callback: (_err, m) => {
        if (m?.headers?.get(MSG_ID_HEADER).startsWith(ofKey)) {
          woken = true;
          wake?.();
        }
      },
    });
    let last: Outcome | undefined;
    let pause = 20;
    try {
      for (;;) {
        let wait = this.cfg.pollInterval;
        try {
          const o = await this.status(account, key, { seq: opts.seq, signal: opts.signal });
          last = o;
          if (done(o)) return o;
        } catch (err) {
          if (err instanceof NoStatusServiceError) throw err;
          if (err instanceof NotFoundError) {
            wait = pause;
            pause = Math.min(2 * pause, this.cfg.pollInterval);
          } else if (opts.signal?.aborted) {
            throw new AwaitAbortedError(key, last, opts.signal.reason);
          }
          // Any other error (a timeout, a 503) is asked again after the wait, as Go's Await does.
        }
        if (woken) {
          woken = false;
          continue;
        }
        await new Promise<void>((resolve) => {
          const t = setTimeout(finish, wait);
          const onAbort = () => finish();
          opts.signal?.addEventListener('abort', onAbort, { once: true });
          function finish() {
            clearTimeout(t);
            opts.signal?.removeEventListener('abort', onAbort);
            wake = undefined;
            resolve();
          }
          wake = finish;
        });
        woken = false;
        if (opts.signal?.aborted) throw new AwaitAbortedError(key, last, opts.signal.reason);
      }
    } finally {
      sub.unsubscribe();
    }
  }

  /**
   * follow creates (or updates) the durable consumer cfg names on ATMOST_EVENTS and hands each
   * event to handle, in the consumer's order, until cfg.signal aborts (follow then resolves) or
   * something fails. An event is acknowledged after handle resolved for it; one whose id was
   * handed over already (a redelivery) is acknowledged without handle. When handle throws,
   * follow gives that event and the rest of its fetch back to JetStream and rejects with the
   * error: the next follow with the same name starts with that event. What follow remembers
   * does not survive the process: a handle with effects of its own dedupes on the event's id.
   */
  async follow(cfg: FollowConfig, handle: (e: Event) => unknown | Promise<unknown>): Promise<void> {
    const batch = cfg.batch ?? 100;
    const remember = cfg.remember ?? 100_000;
    const ackWait = cfg.ackWait ?? 30_000;
    if (!cfg.durable) throw new Error('atmost: follow: a durable name is required');
    if (!(batch >= 1 && remember >= 1 && ackWait >= 0)) throw new RangeError(`atmost: follow: configuration out of range: batch ${batch}, remember ${remember}, ack wait ${ackWait}`);
    const signal = cfg.signal;
    const consumer = await this.consumer(cfg, batch, ackWait);
    const seen = new Set<string>();
    while (!signal?.aborted) {
      const msgs = await consumer.fetch({ max_messages: batch, expires: 1000 });
      const stop = () => void msgs.close();
      signal?.addEventListener('abort', stop, { once: true });
      try {
        // Each event is handed over as it arrives, not when the fetch ends.
        const it = msgs[Symbol.asyncIterator]();
        for (;;) {
          const next = await it.next();
          if (next.done) break;
          const m = next.value;
          if (signal?.aborted) {
            await giveBack(m, it);
            return;
          }
          let e: Event;
          try {
            e = parseEvent(m.string());
          } catch (err) {
            await giveBack(m, it);
            throw new Error(`atmost: follow ${cfg.durable}: ${m.subject} is not an event of version 1: ${(err as Error).message}`, { cause: err });
          }
          if (!seen.has(e.id)) {
            try {
              await handle(e);
            } catch (err) {
              await giveBack(m, it);
              throw err;
            }
            seen.add(e.id);
            if (seen.size > remember) seen.delete(seen.values().next().value as string);
          }
          m.ack();
        }
      } finally {
        signal?.removeEventListener('abort', stop);
      }
    }
  }

  private async consumer(cfg: FollowConfig, batch: number, ackWait: number): Promise<Consumer> {
    if (cfg.bind) {
      if (cfg.accounts?.length || cfg.states?.length || cfg.deliverNew) {
        throw new Error(`atmost: follow: ${cfg.durable} is bound: its own configuration decides what it delivers, not accounts, states or deliverNew`);
      }
      return this.js.consumers.get(EVENTS_STREAM, cfg.durable);
    }
    const filters = followFilters(cfg);
    const jsm = await jetstreamManager(this.nc, { ...this.apiOptions(), checkAPI: false });
    const change: Partial<ConsumerConfig> = {
      ack_wait: nanos(ackWait),
      max_ack_pending: batch,
      filter_subject: filters.length === 1 ? filters[0] : undefined,
      filter_subjects: filters.length === 1 ? undefined : filters,
    };
    try {
      await jsm.consumers.info(EVENTS_STREAM, cfg.durable);
      // Where a consumer starts is fixed at its creation (asking for another is JetStream's
      // error 10012): an update keeps it, whatever deliverNew says now.
      await jsm.consumers.update(EVENTS_STREAM, cfg.durable, change);
    } catch (err) {
      if (!(err instanceof JetStreamApiError && err.code === JetStreamApiCodes.ConsumerNotFound)) throw err;
      await jsm.consumers.add(EVENTS_STREAM, {
        ...change,
        durable_name: cfg.durable,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: cfg.deliverNew ? DeliverPolicy.New : DeliverPolicy.All,
      });
    }
    return this.js.consumers.get(EVENTS_STREAM, cfg.durable);
  }
}

/**
 * followFilters returns the subject filters of a follow: one per (state, account) pair when
 * both are given, one per account or per state when one is, every event when neither is. It
 * refuses a state that is not one of the six and an account the envelope refuses.
 */
export function followFilters(cfg: Pick<FollowConfig, 'accounts' | 'states'>): string[] {
  for (const s of cfg.states ?? []) {
    if (!STATES.includes(s)) throw new Error(`atmost: follow: ${JSON.stringify(s)} is not a state (${STATES.join(', ')})`);
  }
  for (const a of cfg.accounts ?? []) {
    const n = new TextEncoder().encode(a).length;
    if (n < 1 || n > 128 || /[\u0000-\u001f\u007f-\u009f]/.test(a) || !a.isWellFormed()) throw new Error(`atmost: follow: invalid_account: ${JSON.stringify(a)}`);
  }
  const accounts = cfg.accounts ?? [];
  const states = cfg.states ?? [];
  let out: string[];
  if (accounts.length && states.length) {
    out = accounts.flatMap((a) => states.map((s) => accountEvents(a).replace('atmost.event.*.', `atmost.event.${s}.`)));
  } else if (accounts.length) {
    out = accounts.map(accountEvents);
  } else if (states.length) {
    out = states.map((s) => `atmost.event.${s}.*`);
  } else {
    out = ['atmost.event.>'];
  }
  return [...new Set(out)].sort();
}

// giveBack hands first and the rest of the fetch back to JetStream for delivery again at once,
// in their order, after the fetch ended: one given back while it is open would come again
// inside it, behind the messages after it.
async function giveBack(first: JsMsg, rest: AsyncIterator<JsMsg>): Promise<void> {
  const msgs = [first];
  for (;;) {
    const next = await rest.next();
    if (next.done) break;
    msgs.push(next.value);
  }
  for (const m of msgs) m.nak();
}

/**
 * publishError says what a publish that got no acknowledgement proves. Only two answers prove
 * that nothing was stored: the stream's 4xx refusal (except the one naming the message id,
 * which says a copy is being stored) and no stream on the subject (no responders). Anything
 * else may follow a stored message.
 */
function publishError(key: string, subject: string, err: unknown): Error {
  if (err instanceof JetStreamApiError && err.status >= 400 && err.status < 500 && err.code !== ERR_DUPLICATE_IN_PROCESS) {
    return new NotPublishedError(key, `JetStream refused it, nothing was stored: ${err.message}`, err);
  }
  // nats.js reports a publish nobody received as JetStreamNotEnabled, its cause no responders.
  const cause = (err as Error)?.cause;
  if (cause instanceof RequestError && cause.isNoResponders()) {
    return new NotPublishedError(key, `no stream takes ${subject} (has any atmost role created its streams?)`, err);
  }
  return new MaybePublishedError(key, err);
}

// abortable settles with p, or rejects with the signal's reason when it aborts first.
function abortable<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
