package docs

import (
	"fmt"
	"regexp"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	// helpTraceVariable is a line of the traces heading of a role's --help.
	helpTraceVariable = regexp.MustCompile(`(?m)^  (OTEL_[A-Z0-9_]+)  `)
	backtickOTEL      = regexp.MustCompile("`(OTEL_[A-Z0-9_]+)`")
)

// traceMismatches compares the variables of a traces table (its "variable" column) with
// those a role's --help prints under its traces heading.
func traceMismatches(doc, help string) []string {
	documented := map[string]bool{}
	for _, row := range tables(doc) {
		for _, m := range backtickOTEL.FindAllStringSubmatch(row["variable"], -1) {
			documented[m[1]] = true
		}
	}
	printed := map[string]bool{}
	for _, m := range helpTraceVariable.FindAllStringSubmatch(help, -1) {
		printed[m[1]] = true
	}
	var out []string
	for v := range printed {
		if !documented[v] {
			out = append(out, fmt.Sprintf("--help prints %s, which the traces section does not list", v))
		}
	}
	for v := range documented {
		if !printed[v] {
			out = append(out, fmt.Sprintf("the traces section lists %s, which --help does not print", v))
		}
	}
	sort.Strings(out)
	return out
}

// The traces section of the configuration page lists exactly the OTEL_ variables every role's
// --help prints.
func TestTheConfigurationPageListsTheTraceVariablesEveryRolePrints(t *testing.T) {
	doc := section(t, configurationDoc(t), "traces")
	for _, bin := range []string{"ingest", "dispatcher", "sweeper", "reconciler"} {
		help := roleHelp(t, bin)
		require.NotEmpty(t, helpTraceVariable.FindAllString(help, -1), "%s --help prints no trace variables", bin)
		require.Empty(t, traceMismatches(doc, help), bin)
	}
}

// The comparison notices a variable left out and one too many.
func TestTheTraceCheckNoticesDifferences(t *testing.T) {
	help := "Traces (OpenTelemetry):\n  OTEL_TRACES_EXPORTER         otlp or none\n  OTEL_EXPORTER_OTLP_ENDPOINT  the collector\n"
	doc := "| variable | what |\n|---|---|\n| `OTEL_TRACES_EXPORTER` | |\n| `OTEL_EXPORTER_OTLP_ENDPOINT` | |\n"
	require.Empty(t, traceMismatches(doc, help))
	require.Len(t, traceMismatches("| variable | what |\n|---|---|\n| `OTEL_TRACES_EXPORTER` | |\n", help), 1, "a variable left out")
	require.Len(t, traceMismatches(doc+"| `OTEL_SERVICE_NAME` | |\n", help), 1, "a variable too many")
}
