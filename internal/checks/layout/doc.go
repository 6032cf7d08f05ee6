// Package layout holds the test that enforces atmost's import direction: the domain core
// (pkg/identity, pkg/ledger, pkg/events) stays free of the transports around it.
package layout

// Rule forbids packages under Root from depending, directly or not, on anything Allowed
// rejects. Why says what the rule protects.
type Rule struct {
	Root    string
	Allowed func(dep string, standard bool) bool
	Why     string
}

// Rules are the import rules of atmost (docs/design.md#code-layout).
var Rules = []Rule{
	{
		Root: "github.com/atmost/atmost/pkg/identity",
		Allowed: func(dep string, standard bool) bool {
			return standard || dep == "golang.org/x/text" || hasPathPrefix(dep, "golang.org/x/text") ||
				hasPathPrefix(dep, "github.com/atmost/atmost/pkg/identity")
		},
		Why: "pkg/identity is the shared identity rule: the standard library and golang.org/x/text only",
	},
	{
		Root: "github.com/atmost/atmost/pkg/atmosttype",
		Allowed: func(dep string, standard bool) bool {
			return standard || hasPathPrefix(dep, "github.com/atmost/atmost/pkg/atmosttype")
		},
		Why: "pkg/atmosttype is the shared vocabulary every other package imports: the standard library only",
	},
	{
		Root:    "github.com/atmost/atmost/pkg/ledger",
		Allowed: func(dep string, _ bool) bool { return !hasPathPrefix(dep, "github.com/nats-io") },
		Why:     "the ledger decides state on its own; it never imports NATS",
	},
	{
		Root: "github.com/atmost/atmost/pkg/tracecontext",
		Allowed: func(dep string, _ bool) bool {
			return !hasPathPrefix(dep, "github.com/nats-io") && !hasPathPrefix(dep, "github.com/atmost/atmost/internal")
		},
		Why: "producers import pkg/tracecontext: it takes a header as a map, so it needs neither NATS nor atmost's internals",
	},
	{
		Root:    "github.com/atmost/atmost/pkg/events",
		Allowed: func(dep string, _ bool) bool { return !hasPathPrefix(dep, "github.com/nats-io") },
		Why:     "event types and subjects carry no transport; the JetStream publisher is a separate package",
	},
	{
		Root: "github.com/atmost/atmost/pkg/client",
		Allowed: func(dep string, _ bool) bool {
			return !hasPathPrefix(dep, "github.com/atmost/atmost/internal") && !hasPathPrefix(dep, "github.com/atmost/atmost/pkg/ledger") &&
				!hasPathPrefix(dep, "github.com/jackc")
		},
		Why: "the client is imported by producers' own modules, which cannot import internal packages and need no database driver",
	},
}

// Violations returns one line per dependency of pkg that a rule forbids. deps maps every
// transitive dependency of pkg to whether it is in the standard library.
func Violations(pkg string, deps map[string]bool) []string {
	var out []string
	for _, r := range Rules {
		if !hasPathPrefix(pkg, r.Root) {
			continue
		}
		for dep, standard := range deps {
			if !r.Allowed(dep, standard) {
				out = append(out, pkg+" depends on "+dep+": "+r.Why)
			}
		}
	}
	return out
}

func hasPathPrefix(path, prefix string) bool {
	return path == prefix || len(path) > len(prefix) && path[:len(prefix)] == prefix && path[len(prefix)] == '/'
}
