package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/cli"
	"github.com/atmost/atmost/internal/migrate"
	"github.com/atmost/atmost/internal/testkit/dbtest"
)

type result struct {
	code           int
	stdout, stderr string
}

func run(env map[string]string, args ...string) result {
	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), cli.IO{
		Stdout: &stdout,
		Stderr: &stderr,
		Env:    func(name string) (string, bool) { v, ok := env[name]; return v, ok },
	}, args)
	return result{code, stdout.String(), stderr.String()}
}

func TestMigrateAppliesOnceThenReportsNothingToDo(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.Empty())
	env := map[string]string{"ATMOST_DATABASE_URL": db.URL}
	latest, err := migrate.Latest()
	require.NoError(t, err)

	first := run(env, "migrate")
	require.Equal(t, cli.ExitOK, first.code, first.stderr)
	require.Equal(t, int(latest), strings.Count(first.stdout, "applied "))
	require.Contains(t, first.stdout, "00001_create_accounts.sql")

	second := run(env, "migrate")
	require.Equal(t, cli.ExitOK, second.code, second.stderr)
	require.NotContains(t, second.stdout, "applied ")
	require.Contains(t, second.stdout, "nothing to apply")
}

func TestMigrateFlagOverridesTheEnvironment(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.Empty())
	env := map[string]string{"ATMOST_DATABASE_URL": "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"}
	res := run(env, "migrate", "status", "--json", "--database-url", db.URL)
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var status struct {
		Current int64 `json:"current_version"`
		Latest  int64 `json:"latest_version"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &status))
	require.Zero(t, status.Current, "status applies nothing")
	require.Positive(t, status.Latest)

	res = run(env, "migrate", "--json", "--database-url", db.URL)
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	requireSnakeCase(t, res.stdout)
	var applied struct {
		Applied []struct {
			Version int64  `json:"version"`
			Name    string `json:"name"`
		} `json:"applied"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &applied))
	require.Len(t, applied.Applied, int(status.Latest))
	require.Equal(t, "00001_create_accounts.sql", applied.Applied[0].Name)
}

func TestMigrateNamesTheFixWhenTheServerIsDown(t *testing.T) {
	t.Parallel()
	res := run(map[string]string{"ATMOST_DATABASE_URL": "postgres://postgres@127.0.0.1:1/atmost?sslmode=disable&connect_timeout=2"}, "migrate")
	require.Equal(t, cli.ExitError, res.code)
	require.Contains(t, res.stderr, "is the server running and ATMOST_DATABASE_URL right?")
}

func TestBadCommandLinesExitWithUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{}, {"frobnicate"}, {"migrate", "--no-such-flag"}, {"migrate", "sideways"}, {"version", "--nope"}} {
		res := run(nil, args...)
		require.Equal(t, cli.ExitUsage, res.code, "atmost %v", args)
	}
	res := run(nil, "help")
	require.Equal(t, cli.ExitOK, res.code)
	require.Contains(t, res.stdout, "migrate")
	require.Contains(t, res.stdout, "version")
}

func TestVersionNamesTheSchemaItExpects(t *testing.T) {
	t.Parallel()
	latest, err := migrate.Latest()
	require.NoError(t, err)
	res := run(nil, "version", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var v struct {
		Version string `json:"version"`
		Schema  int64  `json:"schema_version"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &v))
	require.NotEmpty(t, v.Version)
	require.Equal(t, latest, v.Schema)

	plain := run(nil, "version")
	require.Equal(t, cli.ExitOK, plain.code, plain.stderr)
	flagged := run(nil, "--version")
	require.Equal(t, cli.ExitOK, flagged.code, flagged.stderr)
	require.Equal(t, plain.stdout, flagged.stdout, "atmost --version is atmost version")
}
