package console

import (
	"github.com/atmost/atmost/pkg/atmosttype"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/ledger"
)

// Every reason that hands an intent to a person or to its lookup has its runbook, in the doc's
// order, and offers only actions the page has.
func TestEveryParkedAndIndeterminateReasonHasItsRunbook(t *testing.T) {
	seen := map[ledger.Reason]bool{}
	for _, r := range runbookOrder {
		require.False(t, seen[r], "%s twice in runbookOrder", r)
		seen[r] = true
	}
	for r, rule := range atmosttype.Reasons() {
		want := rule.State == ledger.Parked || rule.State == ledger.Indeterminate
		e, ok := runbook[r]
		require.Equal(t, want, ok, "runbook entry of %s (%s)", r, rule.State)
		require.Equal(t, want, seen[r], "%s in runbookOrder", r)
		if !ok {
			continue
		}
		require.NotEmpty(t, e.What, r)
		require.NotEmpty(t, e.Then, r)
		for _, a := range e.Fits {
			require.NotEmpty(t, fitTitles[a], "%s fits %q, an action the page does not have", r, a)
			if rule.State == ledger.Indeterminate {
				require.Equal(t, fitPark, a, "%s: an indeterminate intent is parked, never resolved or sent again", r)
			}
		}
	}
	require.Len(t, runbook, len(runbookOrder))
}

// The reason sections of docs/operators.md are the runbook the intent page shows: generated
// from the same table. ATMOST_WRITE_RUNBOOK=1 writes them again.
func TestTheRunbookIsTheOperatorsDoc(t *testing.T) {
	const path = "../../docs/operators.md"
	body, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := string(body)
	for _, st := range []ledger.State{ledger.Parked, ledger.Indeterminate} {
		begin := "<!-- runbook:" + string(st) + ": generated from internal/console/runbook.go -->\n"
		end := "<!-- end of runbook:" + string(st) + " -->"
		i, j := strings.Index(doc, begin), strings.Index(doc, end)
		require.True(t, i >= 0 && j > i, "docs/operators.md has no %q ... %q", begin, end)
		want := RunbookMarkdown(st) + "\n"
		if os.Getenv("ATMOST_WRITE_RUNBOOK") == "1" {
			doc = doc[:i+len(begin)] + want + doc[j:]
			continue
		}
		require.Equal(t, want, doc[i+len(begin):j], "docs/operators.md's %s reasons differ from internal/console/runbook.go: ATMOST_WRITE_RUNBOOK=1 go test ./internal/console -run TestTheRunbookIsTheOperatorsDoc writes them", st)
	}
	if os.Getenv("ATMOST_WRITE_RUNBOOK") == "1" {
		require.NoError(t, os.WriteFile(path, []byte(doc), 0o644))
	}
}
