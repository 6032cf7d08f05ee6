package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/atmost/atmost/internal/jsonview"
	"github.com/atmost/atmost/pkg/identity"
)

func rejectsCommand() *Command {
	var reason string
	var limit int
	return &Command{Name: "rejects", Summary: "rejects ls, rejects replay: refused input, newest first, with its reason; re-submit it once its cause is fixed",
		About: `Input that ingest refused, newest first: when, why (the reason and its detail), the subject and
stream sequence it came from, its size and the start of its bytes. The ledger keeps every
refused message (up to 64 KiB of it, and the SHA-256 of all of it) and publishes it on
atmost.rejected.<reason>; nothing refused is lost, and nothing in this table is retried unless
an operator replays it (atmost rejects replay --help). A message the database would not take
at all is listed as unstorable, by its size and SHA-256.

The table shows control characters and bytes that are not UTF-8 as escapes. With --json, the
subject, the detail and each header key and value are as the ledger stores them: as they came
when they are UTF-8 without NUL, otherwise "base64:" and the base64 of their bytes.`,
		Subs: []*Command{{Name: "ls", Summary: "refused input, newest first",
			Flags: func(f *Flags) {
				f.String(&reason, "reason", "R", "", "only messages refused for this reason")
				f.Int(&limit, "limit", "N", 20, "at most this many messages (1 to 1000)")
				f.Ledger("the ledger database")
				f.JSON("print JSON instead of a table")
			},
			Run: func(ctx context.Context, c *line) int { return listRejects(ctx, c, reason, limit) },
		}, replayCommand()},
	}
}

func listRejects(ctx context.Context, c *line, reasonFlag string, limitFlag int) int {
	io, limit := c.io, &limitFlag
	reason := strings.TrimSpace(reasonFlag)
	if c.given("reason") && !identity.Reason(reason).Valid() {
		return c.usageError("--reason %q: give one of %s", reasonFlag, strings.Join(rejectReasons(), ", "))
	}
	if *limit < 1 || *limit > 1000 {
		return c.usageError("--limit %d: give 1 to 1000", *limit)
	}
	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	rejects, err := l.Rejects(ctx, reason, *limit)
	if err != nil {
		return c.fail(err)
	}
	if c.asJSON {
		out := make([]jsonview.Reject, len(rejects))
		for i, rej := range rejects {
			out[i] = jsonview.RejectOf(rej)
		}
		return writeJSON(io, out)
	}
	w := tabwriter.NewWriter(io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "AT\tREASON\tSUBJECT\tSEQ\tSIZE\tDETAIL\tSTARTS WITH")
	for _, r := range rejects {
		seq := "-"
		if r.StreamSeq > 0 {
			seq = fmt.Sprint(r.StreamSeq)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", timestamp(r.At), r.Reason, oneLine(r.Subject, 80), seq, r.Size, oneLine(r.Detail, 60), oneLine(string(r.Preview), 40))
	}
	_ = w.Flush()
	return ExitOK
}

func rejectReasons() []string {
	var out []string
	for _, r := range identity.AllReasons() {
		out = append(out, string(r))
	}
	return out
}

// oneLine shows untrusted text in one table cell: control characters and invalid UTF-8 as
// escapes, cut at max runes, "-" when empty.
func oneLine(s string, max int) string {
	var b strings.Builder
	runes := 0
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		var piece string
		switch {
		case r == utf8.RuneError && size == 1:
			piece = fmt.Sprintf(`\x%02x`, s[0])
		case r == '\t' || r == '\n' || r == '\r' || !unicode.IsPrint(r):
			piece = strings.Trim(fmt.Sprintf("%q", string(r)), `"`)
		default:
			piece = string(r)
		}
		if runes+utf8.RuneCountInString(piece) > max {
			b.WriteString("…")
			break
		}
		b.WriteString(piece)
		runes += utf8.RuneCountInString(piece)
		s = s[size:]
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}
