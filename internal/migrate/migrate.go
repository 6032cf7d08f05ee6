package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"go.uber.org/zap"

	"github.com/atmost/atmost/migrations"
)

// Options tune Up. The zero value is the default.
type Options struct {
	// CreateDatabase creates the database named in the URL when it does not exist, connecting
	// to the server's "postgres" database to do so. Default false: a missing database is
	// ErrDatabaseMissing.
	CreateDatabase bool
	// Logger receives one line per applied migration. Nil means no logging.
	Logger *zap.Logger
}

// Applied describes one migration that Up ran.
type Applied struct {
	Version int64
	Name    string
}

// Up applies every pending migration to the database at databaseURL and returns the ones it
// ran, in order. It returns an empty slice when the schema is already current. An error names
// the migration that failed; the migrations before it stay applied, each in its own
// transaction.
func Up(ctx context.Context, databaseURL string, opts Options) ([]Applied, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	if opts.CreateDatabase {
		created, err := ensureDatabase(ctx, cfg)
		if err != nil {
			return nil, err
		}
		if created {
			log.Info("database created", zap.String("database", cfg.Database))
		}
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return nil, describeConnectError(cfg, err)
	}
	if err := ensureRole(ctx, db, migrations.AppRole); err != nil {
		return nil, err
	}
	provider, err := newProvider(db)
	if err != nil {
		return nil, err
	}
	results, err := provider.Up(ctx)
	applied := make([]Applied, 0, len(results))
	for _, r := range results {
		if r.Error != nil {
			continue
		}
		applied = append(applied, Applied{Version: r.Source.Version, Name: path.Base(r.Source.Path)})
		log.Info("migration applied", zap.Int64("version", r.Source.Version), zap.String("file", path.Base(r.Source.Path)), zap.Duration("took", r.Duration))
	}
	if err != nil {
		return applied, fmt.Errorf("apply migrations: %w", err)
	}
	return applied, nil
}

// Current returns the highest migration version applied to the database at databaseURL,
// 0 for a database that has never been migrated.
func Current(ctx context.Context, databaseURL string) (int64, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return 0, fmt.Errorf("parse database URL: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return 0, describeConnectError(cfg, err)
	}
	provider, err := newProvider(db)
	if err != nil {
		return 0, err
	}
	v, err := provider.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// Latest returns the highest migration version this binary carries.
func Latest() (int64, error) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return 0, err
	}
	var latest int64
	for _, name := range names {
		prefix, _, ok := strings.Cut(name, "_")
		if !ok {
			return 0, fmt.Errorf("migration %s: name is not NNNNN_description.sql", name)
		}
		v, err := strconv.ParseInt(prefix, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("migration %s: %w", name, err)
		}
		latest = max(latest, v)
	}
	return latest, nil
}

func newProvider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresTableLocker()
	if err != nil {
		return nil, fmt.Errorf("create migration locker: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return provider, nil
}

// ensureRole creates role unless it exists. Roles are global to the server and parallel
// migrations of different databases race to create it: the loser sees duplicate_object or a
// unique violation on pg_authid, both of which mean someone else created it.
func ensureRole(ctx context.Context, db *sql.DB, role string) error {
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, role).Scan(&exists); err != nil {
		return fmt.Errorf("look up role %s: %w", role, err)
	}
	if exists {
		return nil
	}
	_, err := db.ExecContext(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN")
	var pgErr *pgconn.PgError
	if err != nil && errors.As(err, &pgErr) && (pgErr.Code == "42710" || pgErr.Code == "23505") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create role %s (the migrating user needs CREATEROLE, or a DBA creates the role first): %w", role, err)
	}
	return nil
}

// ensureDatabase creates cfg.Database through the server's "postgres" database. It reports
// whether it created it; a concurrent creator is tolerated.
func ensureDatabase(ctx context.Context, cfg *pgx.ConnConfig) (bool, error) {
	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return false, describeConnectError(cfg, err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, cfg.Database).Scan(&exists); err != nil {
		return false, fmt.Errorf("look up database %s: %w", cfg.Database, err)
	}
	if exists {
		return false, nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{cfg.Database}.Sanitize())
	var pgErr *pgconn.PgError
	if err != nil && errors.As(err, &pgErr) && pgErr.Code == "42P04" {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create database %s: %w", cfg.Database, err)
	}
	return true, nil
}

// describeConnectError turns the errors an operator meets first into sentences naming the fix.
func describeConnectError(cfg *pgx.ConnConfig, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "3D000" {
		return fmt.Errorf("%w: %q on %s:%d; create it (createdb %s) or run atmost migrate --create-database", ErrDatabaseMissing, cfg.Database, cfg.Host, cfg.Port, cfg.Database)
	}
	return fmt.Errorf("connect to PostgreSQL at %s:%d as %s (is the server running and ATMOST_DATABASE_URL right?): %w", cfg.Host, cfg.Port, cfg.User, err)
}
