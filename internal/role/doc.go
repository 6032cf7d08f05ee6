// Package role is what every atmost role process shares, and the parent of the roles
// (dispatch, ingest, reconcile, sweep), a file per concern:
//
//   - env.go: settings from the environment (Env), which the flags override.
//   - common.go: the configuration every role has (Common) and the actor it writes as.
//   - role.go: the command line (Parse), the logger, and the exit-code convention (Run: 0 clean,
//     1 fatal, 2 usage).
//   - start.go: the connections to PostgreSQL and NATS, the streams, the ledger and the relay
//     (Start), and the readiness checks.
//   - metrics.go: the collectors every role registers (outbox lag, build info, a consumer's
//     pending messages).
//   - gc.go: the garbage collector's target (TuneGC).
//   - vacuum.go: the warning about a PostgreSQL without autovacuum.
//
// The NATS connection and the consumers' messages are package natsconn's; the start-up retry
// is package backoff's.
package role
