// Types of identity.mjs, atmost's key rule in JavaScript, for the TypeScript client (src/)
// that reuses it. The rule itself, and what each function does, is in identity.mjs.

/** A JSON value that does not parse as atmost's parser requires. */
export class JSONError extends Error {
  constructor(name: string, detail: string, path: (string | number)[]);
  /** malformed_json, trailing_data, duplicate_key, invalid_utf8, not_object, inexact_number, too_deep */
  code: string;
  path: (string | number)[];
}

/** An envelope ingest would refuse, with ingest's reason. */
export class RejectError extends Error {
  constructor(reason: string, detail: string);
  reason: string;
}

/** A source id NewSourceVersion refuses. */
export class SourceIDError extends Error {
  constructor(code: string, detail: string);
  /** empty_source_id (nothing left after trimming) or invalid_utf8 */
  code: string;
}

/** A source's version, as pkg/identity's NewSourceVersion derives it. */
export interface SourceVersion {
  /** The canonical source id: what an envelope's source.id is stored as. */
  id: string;
  /** sv1: and 64 lower-case hex digits: an envelope's source.version. */
  version: string;
  /** raw1: and the SHA-256 of the body's exact bytes, for the producer's own records. */
  rawHash: string;
}

/** The parts of a valid envelope, canonical: request is RFC 8785 JSON, its text normalized. */
export interface ParsedEnvelope {
  account: string;
  action: string;
  target: string;
  request: string;
  occurrence: string;
  source: { id: string; version: string } | null;
  /** The parent's delivery key (reply_to), "" for an intent with a literal target. */
  replyTo: string;
  /** not_before and expires_at in their canonical spelling (UTC), null when absent: outside the key. */
  notBefore: string | null;
  expiresAt: string | null;
}

export function isWhiteSpace(c: number): boolean;
export function decodeUTF8(bytes: Uint8Array): string;
export function normalizeText(s: string): string;
export function textHash(text: string): string;
export function claimID(sourceVersion: string, content: string): string;
export function accountToken(account: string | Uint8Array): string;
export const MAX_JSON_DEPTH: number;
export const MAX_ENVELOPE_BYTES: number;
/** A parsed JSON value (identity.mjs's own representation). */
export type JSONValue = { kind: string; value?: unknown };
export function parseJSON(input: string | Uint8Array, depth?: number): JSONValue;
export function canonicalJSON(input: string | Uint8Array): string;
export function canonicalObject(input: string | Uint8Array): string;
export function parseEnvelope(input: string | Uint8Array): ParsedEnvelope;
export function canonicalEnvelope(e: ParsedEnvelope): string;
export function deliveryKey(e: ParsedEnvelope): string;
export function envelopeText(e: ParsedEnvelope): string | null;
export function canonicalSourceID(id: string | Uint8Array): string;
export function normalizeBody(body: string | Uint8Array): string;
export function rawHash(body: string | Uint8Array): string;
export function sourceVersion(sourceID: string | Uint8Array, body: string | Uint8Array): SourceVersion;
