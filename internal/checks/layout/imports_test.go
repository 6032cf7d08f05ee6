package layout

import (
	"bufio"
	"bytes"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestImportDirection(t *testing.T) {
	pkgs := goList(t, "-f", "{{.ImportPath}}", "github.com/atmost/atmost/...")
	require.Contains(t, pkgs, "github.com/atmost/atmost/pkg/identity", "the identity core exists")
	checked := 0
	for _, pkg := range pkgs {
		if !coveredByRule(pkg) {
			continue
		}
		checked++
		deps := map[string]bool{}
		for _, line := range goList(t, "-deps", "-f", "{{.ImportPath}} {{.Standard}}", pkg) {
			path, standard, _ := strings.Cut(line, " ")
			deps[path] = standard == "true"
		}
		violations := Violations(pkg, deps)
		sort.Strings(violations)
		require.Empty(t, violations)
	}
	require.Positive(t, checked)
}

// The rules must actually reject what they name, or TestImportDirection proves nothing.
func TestRulesRejectForbiddenDependencies(t *testing.T) {
	for _, c := range []struct {
		pkg, dep string
		standard bool
		rejected bool
	}{
		{"github.com/atmost/atmost/pkg/identity", "crypto/sha256", true, false},
		{"github.com/atmost/atmost/pkg/identity", "golang.org/x/text/unicode/norm", false, false},
		{"github.com/atmost/atmost/pkg/identity", "github.com/jackc/pgx/v5", false, true},
		{"github.com/atmost/atmost/pkg/identity", "golang.org/x/textual", false, true},
		{"github.com/atmost/atmost/pkg/identity", "github.com/atmost/atmost/internal/migrate", false, true},
		{"github.com/atmost/atmost/pkg/atmosttype", "slices", true, false},
		{"github.com/atmost/atmost/pkg/atmosttype", "github.com/atmost/atmost/pkg/identity", false, true},
		{"github.com/atmost/atmost/pkg/client", "github.com/atmost/atmost/pkg/atmosttype", false, false},
		{"github.com/atmost/atmost/pkg/ledger", "github.com/jackc/pgx/v5", false, false},
		{"github.com/atmost/atmost/pkg/ledger", "github.com/nats-io/nats.go", false, true},
		{"github.com/atmost/atmost/pkg/ledger/sqlc", "github.com/nats-io/nats.go/jetstream", false, true},
		{"github.com/atmost/atmost/pkg/events", "github.com/nats-io/nats-server/v2/server", false, true},
		{"github.com/atmost/atmost/pkg/eventsjs", "github.com/nats-io/nats.go", false, false},
		{"github.com/atmost/atmost/pkg/client", "github.com/nats-io/nats.go/jetstream", false, false},
		{"github.com/atmost/atmost/pkg/client", "github.com/atmost/atmost/pkg/identity", false, false},
		{"github.com/atmost/atmost/pkg/client", "github.com/atmost/atmost/internal/outcome", false, true},
		{"github.com/atmost/atmost/pkg/client", "github.com/atmost/atmost/pkg/ledger", false, true},
		{"github.com/atmost/atmost/pkg/client", "github.com/jackc/pgx/v5", false, true},
		{"github.com/atmost/atmost/pkg/tracecontext", "go.opentelemetry.io/otel/propagation", false, false},
		{"github.com/atmost/atmost/pkg/tracecontext", "github.com/nats-io/nats.go", false, true},
		{"github.com/atmost/atmost/pkg/tracecontext", "github.com/atmost/atmost/internal/tracing", false, true},
	} {
		got := Violations(c.pkg, map[string]bool{c.dep: c.standard})
		require.Equal(t, c.rejected, len(got) > 0, "%s -> %s", c.pkg, c.dep)
	}
}

func coveredByRule(pkg string) bool {
	for _, r := range Rules {
		if hasPathPrefix(pkg, r.Root) {
			return true
		}
	}
	return false
}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list %v: %s", args, stderr.String())
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}
