// The outcome service's reply and errors, and the events of ATMOST_EVENTS, as types.

import type { RejectReason } from './intent.js';

/** The six states of an intent. */
export type State = 'pending' | 'authorized' | 'published' | 'failed' | 'indeterminate' | 'parked';

/** The six states, in the order of docs/design.md. */
export const STATES: readonly State[] = ['pending', 'authorized', 'published', 'failed', 'indeterminate', 'parked'];

/** What may follow a reason (docs/design.md#reasons). */
export type Retry = 'progress' | 'done' | 'yes' | 'by policy' | 'never' | 'human';

/**
 * Ingest's refusal of the message that carried an intent: nothing will be sent. It is an Error,
 * so a producer can throw it as it is; remedy says how an operator stores the message after
 * all when the operator can fix the cause (unknown_account).
 */
export class Rejection extends Error {
  readonly reason: RejectReason;
  readonly detail: string;
  readonly remedy: string;
  constructor(reason: RejectReason, detail: string, remedy = '') {
    super(`ingest refused the message: ${reason}: ${detail}${remedy ? '; ' + remedy : ''}`);
    this.name = 'Rejection';
    this.reason = reason;
    this.detail = detail;
    this.remedy = remedy;
  }
}

/**
 * What the ledger holds of one intent, as the outcome service read it. A field that does not
 * apply is absent: a refusal (rejected) has no state, reason, retry, seq or updatedAt.
 */
export interface Outcome {
  key: string;
  account: string;
  state?: State;
  reason?: string;
  retry?: Retry;
  /** The number of the intent's latest transition, the seq of its latest event. */
  seq?: number;
  /** The platform's id of what was created, once published. */
  objectId?: string;
  /** The database's time of the latest transition (RFC 3339). */
  updatedAt?: string;
  /** Set when no intent was stored because ingest refused the message (asked for with seq). */
  rejected?: Rejection;
}

/**
 * settled reports whether the intent reached a state that answers a producer: published,
 * failed (proven not sent), parked (a person decides), or refused by ingest.
 */
export function settled(o: Outcome): boolean {
  return o.state === 'published' || o.state === 'failed' || o.state === 'parked' || o.rejected !== undefined;
}

/** parseOutcome reads the outcome service's reply (its wire names are snake_case). */
export function parseOutcome(data: string): Outcome {
  const w = JSON.parse(data) as Record<string, unknown>;
  if (typeof w !== 'object' || w === null || typeof w.delivery_key !== 'string' || typeof w.account !== 'string') {
    throw new Error(`atmost: the outcome does not parse: ${data}`);
  }
  const o: Outcome = { key: w.delivery_key, account: w.account };
  if (typeof w.state === 'string') o.state = w.state as State;
  if (typeof w.reason === 'string') o.reason = w.reason;
  if (typeof w.retry === 'string') o.retry = w.retry as Retry;
  if (typeof w.seq === 'number') o.seq = w.seq;
  if (typeof w.object_id === 'string') o.objectId = w.object_id;
  if (typeof w.updated_at === 'string') o.updatedAt = w.updated_at;
  const r = w.rejected as Record<string, unknown> | undefined;
  if (r && typeof r === 'object') {
    o.rejected = new Rejection(r.reason as RejectReason, String(r.detail ?? ''), typeof r.remedy === 'string' ? r.remedy : '');
  }
  return o;
}

/**
 * The answer to a cancel: cancelled (parked cancelled, by this request or an earlier one), or
 * too late, with the state the intent is in (authorized: the send may be under way).
 */
export interface CancelResult {
  key: string;
  account: string;
  cancelled: boolean;
  state: State;
  reason: string;
  seq?: number;
}

/** parseCancelResult reads the cancel endpoint's reply (snake_case on the wire). */
export function parseCancelResult(data: string): CancelResult {
  const w = JSON.parse(data) as Record<string, unknown>;
  if (typeof w !== 'object' || w === null || typeof w.delivery_key !== 'string' || typeof w.account !== 'string' ||
    typeof w.cancelled !== 'boolean' || typeof w.state !== 'string' || typeof w.reason !== 'string') {
    throw new Error(`atmost: the cancel result does not parse: ${data}`);
  }
  const r: CancelResult = { key: w.delivery_key, account: w.account, cancelled: w.cancelled, state: w.state as State, reason: w.reason };
  if (typeof w.seq === 'number') r.seq = w.seq;
  return r;
}

/**
 * One transition of one intent on ATMOST_EVENTS (pkg/events/event.schema.json), with the wire
 * names. id (ev1:<key hex>:<seq>) is stable per transition: dedupe on it. The latest state of a
 * key is its highest seq, not the last event to arrive.
 */
export interface Event {
  v: 1;
  id: string;
  delivery_key: string;
  seq: number;
  account: string;
  /** "" for the creation. */
  from: State | '';
  to: State;
  reason: string;
  attempt?: string;
  epoch?: number;
  generation?: number;
  actor: string;
  at: string;
}

const EVENT_FIELDS = new Set(['v', 'id', 'delivery_key', 'seq', 'account', 'from', 'to', 'reason', 'attempt', 'epoch', 'generation', 'actor', 'at']);

/**
 * parseEvent reads one event of version 1 and throws for anything else: a member this version
 * does not define, a missing one, another version. A consumer stops there rather than skip
 * what a later version added.
 */
export function parseEvent(data: string): Event {
  const e = JSON.parse(data) as Record<string, unknown>;
  if (typeof e !== 'object' || e === null || Array.isArray(e)) throw new Error('atmost: an event is a JSON object');
  for (const k of Object.keys(e)) if (!EVENT_FIELDS.has(k)) throw new Error(`atmost: unknown event field ${k}`);
  if (e.v !== 1) throw new Error(`atmost: event version ${String(e.v)}, this client reads 1`);
  const str = (k: string) => typeof e[k] === 'string';
  if (!str('id') || !/^ev1:[0-9a-f]{64}:[1-9][0-9]*$/.test(e.id as string) || !str('delivery_key') || typeof e.seq !== 'number' ||
    !str('account') || !str('from') || !STATES.includes(e.to as State) || !str('reason') || !str('actor') || !str('at')) {
    throw new Error(`atmost: not an event of version 1: ${data.slice(0, 200)}`);
  }
  return e as unknown as Event;
}
