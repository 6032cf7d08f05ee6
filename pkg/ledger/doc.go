// Package ledger is the delivery-intent state machine of atmost, on PostgreSQL or CockroachDB.
// It is the only code that changes ledger state. Start at statemachine.go: the states, the
// reasons, the transitions and, for each operation, the statements of queries/ that guard it.
//
// An intent is in one of six states (State). Every operation is one guarded statement or one
// transaction whose guard lives in the statement that changes the row (compare-and-set on
// state, attempt token and fence), so correctness does not depend on the isolation level. Every
// transition appends its history row and its outbox row in the same statement. The clock is the
// database's now(), never the caller's.
//
// A refused operation changes nothing and returns a named error (ErrInvalidTransition,
// ErrClaimed, ErrLeaseLost, ErrFenced, ...), never a silent no-op; a completion that arrives
// with a stale fence is kept as evidence and reported as ErrFenced.
//
// The package never imports NATS: publishing the outbox is the relay's job.
package ledger
