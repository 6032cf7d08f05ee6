package migrations_test

import (
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/migrations"
)

// Constructs outside the dialect PostgreSQL and CockroachDB share (docs/design.md#the-sql-dialect).
var forbidden = map[string]*regexp.Regexp{
	"trigger":             regexp.MustCompile(`(?i)\btrigger\b`),
	"LISTEN/NOTIFY":       regexp.MustCompile(`(?i)\b(listen|notify)\b`),
	"advisory lock":       regexp.MustCompile(`(?i)advisory`),
	"exclusion":           regexp.MustCompile(`(?i)\bexclude\b`),
	"range type":          regexp.MustCompile(`(?i)\b(int4range|int8range|numrange|tsrange|tstzrange|daterange)\b`),
	"SERIAL":              regexp.MustCompile(`(?i)\b(small|big)?serial\b`),
	"procedural block":    regexp.MustCompile(`(?i)\$\$|\bplpgsql\b|\bDO\s`),
	"unnamed conflict":    regexp.MustCompile(`(?i)on\s+conflict\s+do`),
	"server-local clock":  regexp.MustCompile(`(?i)\b(clock_timestamp|statement_timestamp|localtimestamp)\b`),
	"sequence ownership":  regexp.MustCompile(`(?i)owned\s+by`),
	"non-portable a type": regexp.MustCompile(`(?i)\b(money|inet|cidr|xml|tsvector)\b`),
}

func TestEveryMigrationHoldsOneStatementEachWay(t *testing.T) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, names)
	for i, name := range names {
		require.True(t, strings.HasPrefix(name, fmt.Sprintf("%05d_", i+1)), "%s: migrations are numbered from 1 without gaps", name)
		body, err := fs.ReadFile(migrations.FS, name)
		require.NoError(t, err)
		up, down := sections(t, name, string(body))
		require.Equal(t, 1, statements(up), "%s: Up must hold exactly one statement", name)
		require.Equal(t, 1, statements(down), "%s: Down must hold exactly one statement", name)
	}
}

func TestMigrationsStayInTheCommonDialect(t *testing.T) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	require.NoError(t, err)
	for _, name := range names {
		body, err := fs.ReadFile(migrations.FS, name)
		require.NoError(t, err)
		code := stripComments(string(body))
		for what, re := range forbidden {
			require.False(t, re.MatchString(code), "%s uses %s, which is outside the PostgreSQL/CockroachDB common dialect", name, what)
		}
	}
}

// The statement counter itself must tell one statement from two, or the test above proves
// nothing.
func TestStatementCounter(t *testing.T) {
	for sql, want := range map[string]int{
		"CREATE TABLE a (x TEXT);":                          1,
		"CREATE TABLE a (x TEXT DEFAULT ';');":              1,
		"-- a; b\nCREATE INDEX i ON a (x);":                 1,
		"CREATE TABLE a (x TEXT); CREATE TABLE b (y TEXT);": 2,
		"INSERT INTO a VALUES ('it''s; fine');":             1,
		"":                                                  0,
	} {
		require.Equal(t, want, statements(sql), sql)
	}
}

func sections(t *testing.T, name, body string) (up, down string) {
	t.Helper()
	_, rest, ok := strings.Cut(body, "-- +goose Up\n")
	require.True(t, ok, "%s: no -- +goose Up", name)
	up, down, ok = strings.Cut(rest, "-- +goose Down\n")
	require.True(t, ok, "%s: no -- +goose Down", name)
	require.NotContains(t, body, "+goose StatementBegin", "%s: one plain statement per section", name)
	return up, down
}

// statements counts the semicolon-terminated statements in sql, ignoring comments and
// semicolons inside string literals.
func statements(sql string) int {
	code := stripComments(sql)
	n, inString, pending := 0, false, false
	for _, r := range code {
		switch {
		case r == '\'':
			inString = !inString
			pending = true
		case r == ';' && !inString:
			n++
			pending = false
		case !inString && !strings.ContainsRune(" \t\r\n", r):
			pending = true
		}
	}
	if pending {
		n++ // a trailing statement without its semicolon
	}
	return n
}

func stripComments(sql string) string {
	var b strings.Builder
	for line := range strings.Lines(sql) {
		if i := strings.Index(line, "--"); i >= 0 && !strings.Contains(line[:i], "'") {
			line = line[:i] + "\n"
		}
		b.WriteString(line)
	}
	return b.String()
}
