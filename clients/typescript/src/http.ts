// The HTTP API's client (docs/http-api.yaml): publish, the outcome with a long poll, await, and
// an account's events as server-sent events, with a producer token. The same intents, keys and
// outcomes as over NATS.

import { envelope, type Intent } from './intent.js';
import { MaybePublishedError, NotFoundError, type Receipt } from './client.js';
import { parseCancelResult, parseEvent, parseOutcome, settled, type CancelResult, type Event, type Outcome } from './outcome.js';

/** Configures an HttpClient. */
export interface HttpClientConfig {
  /** Where ingest serves the API (its --http-api), e.g. http://127.0.0.1:8088. */
  url: string;
  /** The producer token, atmost_pr_..., from `atmost producers add`. */
  token: string;
  /** How long one request may take before it is abandoned (ms; a long poll adds its wait). Default 15000. */
  timeout?: number;
  /** The fetch to use; default the global one. */
  fetch?: typeof fetch;
}

/**
 * A refusal of the HTTP API: status is the HTTP status, code the error's code (a reject reason
 * for a refused envelope, or unauthorized, account_not_bound, not_found, ...). seq names a
 * refused envelope stored as a reject, key its delivery key when it was a valid envelope,
 * remedy what an operator can do (unknown_account).
 */
export class HttpApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly seq: number | undefined;
  readonly key: string | undefined;
  readonly remedy: string | undefined;
  constructor(status: number, body: { code?: string; message?: string; seq?: number; delivery_key?: string; remedy?: string }) {
    super(`atmost: HTTP ${status} ${body.code ?? ''}: ${body.message ?? ''}${body.remedy ? '; ' + body.remedy : ''}`);
    this.name = 'HttpApiError';
    this.status = status;
    this.code = body.code ?? '';
    this.seq = body.seq;
    this.key = body.delivery_key;
    this.remedy = body.remedy;
  }
}

/** One server-sent event of an account's stream: id is its sequence in ATMOST_EVENTS. */
export interface StreamedEvent {
  id: string;
  event: Event;
}

/** HttpClient speaks the HTTP API with one producer token, which acts only for its accounts. */
export class HttpClient {
  private readonly base: string;
  private readonly token: string;
  private readonly timeout: number;
  private readonly fetch: typeof fetch;

  constructor(cfg: HttpClientConfig) {
    this.base = cfg.url.replace(/\/+$/, '');
    this.token = cfg.token;
    this.timeout = cfg.timeout ?? 15_000;
    this.fetch = cfg.fetch ?? globalThis.fetch;
  }

  private signal(extra: number, signal?: AbortSignal): AbortSignal {
    const t = AbortSignal.timeout(this.timeout + extra);
    return signal ? AbortSignal.any([t, signal]) : t;
  }

  /**
   * publish validates the intent as ingest does (a RejectError, nothing sent), POSTs its
   * canonical envelope with its key in Atmost-Delivery-Key, and answers the receipt. A refusal
   * is an HttpApiError (certainly not stored as an intent); no answer, a 5xx or an answer that
   * does not parse is a MaybePublishedError: publish the same intent again.
   */
  async publish(intent: Intent, opts: { signal?: AbortSignal } = {}): Promise<Receipt> {
    const env = envelope(intent);
    let res: Response;
    let text: string;
    try {
      res = await this.fetch(`${this.base}/v1/intents`, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.token}`, 'content-type': 'application/json', 'atmost-delivery-key': env.key },
        body: env.canonical,
        signal: this.signal(0, opts.signal),
      });
      text = await res.text();
    } catch (err) {
      throw new MaybePublishedError(env.key, err);
    }
    if (res.status === 202) {
      let r: { delivery_key?: unknown; seq?: unknown; duplicate?: unknown } = {};
      try {
        r = JSON.parse(text);
      } catch {
        // not the receipt: below
      }
      if (r.delivery_key !== env.key || typeof r.seq !== 'number') throw new MaybePublishedError(env.key, new Error(`an answer that is not the receipt of ${env.key}: ${text.slice(0, 200)}`));
      return { key: env.key, account: env.account, stream: 'ATMOST_INTENTS', seq: r.seq, duplicate: r.duplicate === true };
    }
    // A 4xx is the API's refusal, before or instead of storing the message as an intent; a 5xx
    // (503: JetStream or the ledger did not answer) proves nothing.
    if (res.status >= 400 && res.status < 500) throw new HttpApiError(res.status, errorOf(text));
    throw new MaybePublishedError(env.key, new HttpApiError(res.status, errorOf(text)));
  }

  /**
   * status answers the outcome of the intent with key (404 is NotFoundError). seq, the POST's,
   * makes ingest's refusal an outcome; wait (a Go duration, at most 60s) long-polls until the
   * intent is settled or wait passed.
   */
  async status(key: string, opts: { seq?: number; wait?: string; signal?: AbortSignal } = {}): Promise<Outcome> {
    const q = new URLSearchParams();
    if (opts.seq) q.set('seq', String(opts.seq));
    if (opts.wait) q.set('wait', opts.wait);
    const qs = q.size ? `?${q}` : '';
    const res = await this.fetch(`${this.base}/v1/intents/${encodeURIComponent(key)}${qs}`, {
      headers: { authorization: `Bearer ${this.token}` },
      signal: this.signal(opts.wait ? 60_000 : 0, opts.signal),
    });
    const text = await res.text();
    if (res.status === 200) return parseOutcome(text);
    const e = errorOf(text);
    if (res.status === 404) throw new NotFoundError(`atmost: ${e.message ?? 'not found'}`);
    throw new HttpApiError(res.status, e);
  }

  /**
   * cancel is DELETE /v1/intents/{key}: the intent is parked cancelled if it is not yet
   * authorized, else the result says too late (cancelled false) and its state. 404 is
   * NotFoundError; cancelling again is always safe.
   */
  async cancel(key: string, opts: { signal?: AbortSignal } = {}): Promise<CancelResult> {
    const res = await this.fetch(`${this.base}/v1/intents/${encodeURIComponent(key)}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${this.token}` },
      signal: this.signal(0, opts.signal),
    });
    const text = await res.text();
    if (res.status === 200) return parseCancelResult(text);
    const e = errorOf(text);
    if (res.status === 404) throw new NotFoundError(`atmost: ${e.message ?? 'not found'}`);
    throw new HttpApiError(res.status, e);
  }

  /**
   * await long-polls until the intent is settled (or until says so) and answers its outcome; a
   * key not stored yet is asked for again. opts.signal ends it with the signal's reason.
   */
  async await(key: string, opts: { seq?: number; until?: (o: Outcome) => boolean; signal?: AbortSignal } = {}): Promise<Outcome> {
    const done = opts.until ?? settled;
    for (;;) {
      opts.signal?.throwIfAborted();
      try {
        const o = await this.status(key, { seq: opts.seq, wait: '60s', signal: opts.signal });
        if (done(o)) return o;
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
        // The long poll waits for a key not stored yet; a 404 after it is asked again.
      }
    }
  }

  /**
   * events opens the account's event stream and answers it once the server holds it: every
   * event stored from then on (or after lastEventId, an SSE id this stream gave) comes, in
   * order. A refusal (401, 403, 429) is thrown here as an HttpApiError. The stream ends when the
   * server ends it or the signal aborts; open it again with the last id to resume. Dedupe on
   * event.id.
   */
  async events(account: string, opts: { lastEventId?: string; signal?: AbortSignal } = {}): Promise<AsyncGenerator<StreamedEvent>> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}`, accept: 'text/event-stream' };
    if (opts.lastEventId) headers['last-event-id'] = opts.lastEventId;
    const res = await this.fetch(`${this.base}/v1/accounts/${encodeURIComponent(account)}/events`, { headers, signal: opts.signal });
    if (res.status !== 200 || !res.body) throw new HttpApiError(res.status, errorOf(await res.text()));
    return readEvents(res.body);
  }
}

// readEvents parses text/event-stream: a blank line ends an event, a line starting with ':' is
// a comment (the keep-alive), "id" and "data" are the fields used.
async function* readEvents(body: NonNullable<Response['body']>): AsyncGenerator<StreamedEvent> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let id = '';
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let nl: number;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        // A CR at the end of what came so far may be the first half of a CRLF.
        if (buf[nl] === '\r' && nl === buf.length - 1) break;
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith('\r\n', nl) ? 2 : 1));
        if (line === '') {
          if (data.length) yield { id, event: parseEvent(data.join('\n')) };
          data = [];
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const v = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'id') id = v;
        else if (field === 'data') data.push(v);
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

function errorOf(text: string): { code?: string; message?: string; seq?: number; delivery_key?: string; remedy?: string } {
  try {
    return (JSON.parse(text) as { error?: Record<string, never> }).error ?? { message: text };
  } catch {
    return { message: text };
  }
}

