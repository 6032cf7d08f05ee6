// Package migrate applies atmost's ledger schema (package migrations) with pressly/goose.
//
// Concurrency between migrators comes from goose's table locker (a lease row in goose_lock),
// never from an advisory lock, so the same code runs on PostgreSQL and CockroachDB. Before the
// files run, the application role they grant to is created if it is missing; PostgreSQL roles
// are global to the server, so a concurrent creator is tolerated. Applying the migrations a
// second time changes nothing.
package migrate
