// The intent, its envelope and its delivery key: identity.mjs (the rule docs/producers.md
// states, held to testdata/identity-vectors.json) behind the types a producer uses.

import * as id from '../identity/identity.mjs';

export {
  JSONError, RejectError, SourceIDError, normalizeText, canonicalJSON, textHash, accountToken,
  canonicalSourceID, normalizeBody, rawHash, sourceVersion,
} from '../identity/identity.mjs';
export type { ParsedEnvelope, SourceVersion } from '../identity/identity.mjs';

/** The reasons ingest refuses a message for (docs/producers.md#reject-reasons). */
export type RejectReason =
  | 'malformed_json' | 'not_object' | 'duplicate_field' | 'unknown_field' | 'missing_field'
  | 'unsupported_version' | 'invalid_utf8' | 'too_large' | 'invalid_account' | 'invalid_action'
  | 'invalid_target' | 'invalid_request' | 'invalid_occurrence' | 'invalid_source'
  | 'invalid_key_header' | 'key_mismatch' | 'subject_mismatch' | 'unknown_account'
  | 'invalid_header' | 'unstorable' | 'misdirected_reply' | 'invalid_time';

/**
 * The source version an intent rests on; no part of the delivery key. sourceVersion(id, body)
 * derives both: `const { id, version } = sourceVersion(url, visibleText)`.
 */
export interface Source {
  /** The source's stable id; ingest stores it canonical (canonicalSourceID). */
  id: string;
  /** sv1: and 64 lower-case hex digits. */
  version: string;
}

/**
 * What a producer asks atmost to do once: the envelope's fields without its version, which
 * the client writes. An empty account or action is the member left out (missing_field), as
 * the Go client has it.
 */
export interface Intent {
  account: string;
  /** [a-z][a-z0-9_]{0,31}: post, reply, like, ... */
  action: string;
  /** The stable identity of what the action is on; absent is "". */
  target?: string;
  /**
   * Exactly what will be sent, a JSON object: a string or Uint8Array is taken as the JSON text
   * it holds (send an integer beyond 2^53 that way, as a string in it), anything else goes
   * through JSON.stringify. It is hashed in RFC 8785 form, its top-level text normalized.
   */
  request: unknown;
  /** Tells a deliberate repeat of the same request from a retry; absent is "". */
  occurrence?: string;
  source?: Source;
  /**
   * The delivery key (dk1:...) of the intent this one answers (a reply, the next post of a
   * thread), instead of a target: it waits until that intent is published and targets the
   * object it created. Part of the delivery key.
   */
  replyTo?: string;
  /**
   * Not sent before this time (a Date, or an RFC 3339 string); at most 30 days ahead when
   * stored. No part of the delivery key: the times stored first stand.
   */
  notBefore?: Date | string;
  /** Never sent from this time on: parked expired. After notBefore; no part of the delivery key. */
  expiresAt?: Date | string;
}

/** An intent validated with ingest's rules: its canonical form and its delivery key. */
export interface Envelope {
  account: string;
  key: string;
  /** The canonical envelope, the bytes the client publishes. */
  canonical: string;
  parts: id.ParsedEnvelope;
}

const q = JSON.stringify;

/**
 * envelope validates an intent with the rules ingest applies and returns its canonical form
 * and delivery key, or throws a RejectError with the reason ingest would store.
 */
export function envelope(i: Intent): Envelope {
  let request: string;
  if (typeof i.request === 'string') {
    request = i.request;
  } else if (i.request instanceof Uint8Array) {
    request = id.decodeUTF8(i.request);
    if (!sameBytes(new TextEncoder().encode(request), i.request)) throw new id.RejectError('invalid_utf8', 'request is not valid UTF-8');
  } else {
    let text: string | undefined;
    try {
      text = JSON.stringify(i.request);
    } catch (e) {
      throw new id.RejectError('invalid_request', `request: ${(e as Error).message}`);
    }
    if (text === undefined) throw new id.RejectError('invalid_request', 'request: not a JSON value');
    request = text;
  }
  // Request text with a lone surrogate would reach the hash, and the platform, as U+FFFD
  // (TextEncoder's repair): refused, as ingest refuses it. The other fields go through
  // JSON.stringify, which escapes a lone surrogate, and the parser refuses the escape.
  if (!request.isWellFormed()) throw new id.RejectError('invalid_utf8', 'request is not valid UTF-16 (a lone surrogate)');
  // The request is parsed alone first, one level deep as in the envelope: text spliced into
  // the envelope must be one JSON value, never members of the envelope's own.
  try {
    id.parseJSON(request, 1);
  } catch (e) {
    if (!(e instanceof id.JSONError)) throw e;
    const reason = { invalid_utf8: 'invalid_utf8', duplicate_key: 'duplicate_field', inexact_number: 'invalid_request', too_deep: 'invalid_request' }[e.code] ?? 'malformed_json';
    throw new id.RejectError(reason, `request: ${e.message}`);
  }
  const members: string[] = ['"v":1'];
  if (i.account) members.push(`"account":${q(i.account)}`);
  if (i.action) members.push(`"action":${q(i.action)}`);
  if (i.target) members.push(`"target":${q(i.target)}`);
  members.push(`"request":${request}`);
  if (i.occurrence) members.push(`"occurrence":${q(i.occurrence)}`);
  if (i.source) members.push(`"source":{"id":${q(i.source.id)},"version":${q(i.source.version)}}`);
  if (i.replyTo) members.push(`"reply_to":${q(i.replyTo)}`);
  if (i.notBefore !== undefined) members.push(`"not_before":${q(rfc3339(i.notBefore))}`);
  if (i.expiresAt !== undefined) members.push(`"expires_at":${q(rfc3339(i.expiresAt))}`);
  const parts = id.parseEnvelope(`{${members.join(',')}}`);
  return { account: parts.account, key: id.deliveryKey(parts), canonical: id.canonicalEnvelope(parts), parts };
}

/** rfc3339 writes a Date as RFC 3339 in UTC; a string is taken as written (the parser checks it). */
function rfc3339(t: Date | string): string {
  if (typeof t === 'string') return t;
  if (Number.isNaN(t.getTime())) throw new id.RejectError('invalid_time', 'an invalid Date');
  return t.toISOString();
}

/** deliveryKey is the intent's delivery key (dk1:...), or throws the RejectError of envelope. */
export function deliveryKey(i: Intent): string {
  return envelope(i).key;
}

/** The subject an account's intents are published on, atmost.intent.<account-token>. */
export function intentSubject(account: string): string {
  return 'atmost.intent.' + id.accountToken(account);
}

/** The subject of the outcome service for an account, atmost.status.<account-token>. */
export function statusSubject(account: string): string {
  return 'atmost.status.' + id.accountToken(account);
}

/** The subject of the cancel endpoint for an account, atmost.cancel.<account-token>. */
export function cancelSubject(account: string): string {
  return 'atmost.cancel.' + id.accountToken(account);
}

/** The subjects of every event of one account, atmost.event.*.<account-token>. */
export function accountEvents(account: string): string {
  return 'atmost.event.*.' + id.accountToken(account);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, n) => x === b[n]);
}
