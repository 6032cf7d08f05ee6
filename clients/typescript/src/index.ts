// @atmost/client: atmost's TypeScript client. The key rule (identity.mjs, held to the shared
// identity vectors), publish, status, await and follow over NATS, the same over the HTTP API
// (HttpClient, docs/http-api.yaml), and the typed outcomes and refusals. docs/producers.md is the
// contract it speaks.

export * from './intent.js';
export * from './outcome.js';
export * from './client.js';
export * from './http.js';
