package docs

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
)

// prometheusOwn are the series Prometheus itself keeps, which an alert may name.
var prometheusOwn = map[string]bool{"up": true}

var metricName = regexp.MustCompile(`"(atmost_[a-z0-9_]+)"`)

// exportedMetrics are the metric names atmost's code declares (a string "atmost_..." in a
// non-test Go file).
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	root := repoRoot(t)
	for _, dir := range []string{"internal", "pkg", "cmd"} {
		require.NoError(t, filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range metricName.FindAllStringSubmatch(string(b), -1) {
				out[m[1]] = true
			}
			return nil
		}))
	}
	return out
}

// The example alert rules of docs/alerts.yml are valid Prometheus rules, as Prometheus's own
// parser reads them, and every metric they name is one atmost exports.
func TestTheExampleAlertRulesParseAndNameMetricsAtmostExports(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "alerts.yml"))
	require.NoError(t, err)
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.Parse(b, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	require.Empty(t, errs)
	exported := exportedMetrics(t)
	require.Contains(t, exported, "atmost_intents", "the metric names are found in the code")
	var unknown []string
	alerts := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "every rule is an alert")
			require.NotEmpty(t, r.Annotations["runbook"], "%s says where to look", r.Alert)
			alerts++
			expr, err := p.ParseExpr(r.Expr)
			require.NoError(t, err, r.Alert)
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok && !exported[vs.Name] && !prometheusOwn[vs.Name] {
					unknown = append(unknown, r.Alert+": "+vs.Name)
				}
				return nil
			})
		}
	}
	sort.Strings(unknown)
	require.Empty(t, unknown, "alerts on metrics atmost does not export")
	require.GreaterOrEqual(t, alerts, 8)
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "operators.md"))
	require.NoError(t, err)
	require.Contains(t, string(doc), "(alerts.yml)", "the runbook points at the rules")
}
