// Package migrations holds atmost's ledger schema as numbered SQL files, embedded in every
// binary that applies them.
//
// Each file is one goose migration holding exactly one statement in its Up section and one in
// its Down section, so every migration transaction carries a single DDL statement (or a single
// seeding INSERT) in the dialect PostgreSQL and CockroachDB share: no triggers, LISTEN/NOTIFY,
// advisory locks, exclusion constraints, range types or SERIAL. A test in this package enforces
// both rules. Files are never edited once released; a change is a new, higher-numbered file.
//
// The grants name the role atmost_app, which must exist before the grants run; roles are global
// to a PostgreSQL server, so internal/migrate creates it (tolerating a concurrent creator)
// before it applies these files.
package migrations

import "embed"

// FS holds every migration file, named NNNNN_description.sql.
//
//go:embed *.sql
var FS embed.FS

// AppRole is the database role the atmost services connect as. It may INSERT and SELECT on
// the append-only tables (attempts, attempt_evidence, history, reconciliations, rejects,
// control_history) and nothing more there.
const AppRole = "atmost_app"
