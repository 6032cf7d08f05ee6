// Package adapters is what the roles do with the platform adapters of configured accounts,
// a file per concern:
//
//   - registry.go: the adapters built into atmost's roles (Registered: atmost's own, registered with platform.Register at init, and any a program built on atmost registers), by platform name.
//   - cache.go: one open adapter per account, reopened when its configuration changes (Cache).
//   - check.go: how far an account's credential and settings can be checked (CheckAccount).
//   - wait.go: why an account's pending intents wait, no attempt opened (Waits, IntentWait).
//   - request.go: the platform's view of an intent, the request an adapter renders (RequestOf).
//   - readback.go: the read-back judge: whether an object read back confirms a claimed
//     success (Judge, ReadBack, ReadBackAfter).
package adapters
