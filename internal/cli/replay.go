package cli

import (
	"context"
	"fmt"
	stdio "io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

const replayAbout = `Re-submits stored rejects through ingest's path, once their cause is fixed (the account now
exists, say): each stored message is parsed again exactly as ingest parses one (the envelope,
its subject against its account, the Atmost-Delivery-Key header), and a valid envelope goes to
the ledger as ingest submits it. A key the ledger holds is never a second intent: the replay
reports it already stored. Rejects are read in the order ingest read them, a page at a time;
each page is one transaction, and each replay is written to the control history (atmost
controls log --kind reject_replay) with the operator and --reason-text.

--reason, --account and --since choose the rejects: refused for that reason, whose envelope
names that account, received at or after that time. A replay that stored a reject's intent
(created it, or found it stored) marks the reject replayed, and a later replay skips it unless
--again is given; one refused again marks nothing, so the reject is tried again once the cause
is fixed. Not replayable, and left as they are: unstorable rejects and invalid_header ones
(their header block was not kept, so the header check cannot be made again), and those of
which the ledger kept only the first 64 KiB. --dry-run runs each page and rolls it back: the
report says what a replay would do now, and nothing changes.

The replay goes straight to the ledger, so it is the remedy for a fixed message that the
producer published again under the same Nats-Msg-Id within JetStream's duplicate window: the
stream drops such a copy as a duplicate of the refused one, and ingest never sees it.

Each created intent's event and dispatch work item go to the ledger's outbox. Without a NATS
server named (--nats-url or ATMOST_NATS_URL), the next relay round of a running role (ingest,
every second; the sweeper, every pass) publishes them; with one, they are published right away.
On a long run a line of progress goes to standard error after each page, at most every few
seconds. The command exits 0 once every chosen reject was replayed or reported, whatever the
outcomes.`

// replayPaging is how a replay reads the rejects: the page (one transaction) and how often at
// most it reports progress.
var replayPaging = struct {
	page     int
	progress time.Duration
}{page: ingest.ReplayPageSize, progress: 3 * time.Second}

// replayFlags are rejects replay's flags.
type replayFlags struct {
	reason, account, since, natsURL string
	limit                           int
	again, dryRun                   bool
}

// replayedJSON is one reject as rejects replay reports it: where its message came from, the
// reason it was refused for, and what the replay did (outcome: created, already_stored,
// refused, skipped, not_replayable).
type replayedJSON struct {
	ID          string     `json:"id"`
	Stream      string     `json:"stream"`
	StreamSeq   int64      `json:"stream_seq"`
	At          time.Time  `json:"at"`
	Reason      string     `json:"reason"`
	Outcome     string     `json:"outcome"`
	Account     string     `json:"account,omitempty"`
	DeliveryKey string     `json:"delivery_key,omitempty"`
	ReasonNow   string     `json:"reason_now,omitempty"`
	DetailNow   string     `json:"detail_now,omitempty"`
	ReplayedBy  string     `json:"replayed_by,omitempty"`
	ReplayedAt  *time.Time `json:"replayed_at,omitempty"`
	Why         string     `json:"why,omitempty"`
}

// replayReport is what rejects replay prints with --json. Event is "published" when the CLI
// published the created intents' events and work items itself, "outbox" when the next relay
// round will, "none" when nothing was created (a dry run creates nothing).
type replayReport struct {
	DryRun     bool                `json:"dry_run"`
	Again      bool                `json:"again"`
	Operator   string              `json:"operator"`
	Reason     string              `json:"reason"`
	Totals     ingest.ReplayTotals `json:"totals"`
	Event      string              `json:"event"`
	EventError string              `json:"event_error,omitempty"`
	Rejects    []replayedJSON      `json:"rejects"`
}

func replayCommand() *Command {
	var p replayFlags
	return &Command{Name: "replay", Summary: "re-submit stored rejects through ingest's path once their cause is fixed", About: replayAbout,
		Flags: func(f *Flags) {
			f.String(&p.reason, "reason", "R", "", "only messages refused for this reason")
			f.String(&p.account, "account", "A", "", "only messages whose envelope names this account")
			f.String(&p.since, "since", "DURATION|TIME", "", "only messages received at or after this: a duration back from now (15m, 2h) or an RFC 3339 time")
			f.Int(&p.limit, "limit", "N", 0, "at most this many rejects (default: every one chosen)")
			f.Bool(&p.again, "again", "also replay rejects a replay stored the intent of before")
			f.Bool(&p.dryRun, "dry-run", "change nothing, print what a replay would do now")
			f.String(&f.c.reason, "reason-text", "TEXT", "", "why, written to the control history").Required("say why, for the control history")
			f.Operator()
			f.String(&p.natsURL, "nats-url", "URL", "", "publish the created intents' events and work items right away on this NATS server (empty: the next relay round publishes them)").Env("ATMOST_NATS_URL")
			f.Ledger("the ledger database")
			f.JSON("print the report as JSON")
		},
		Run: func(ctx context.Context, c *line) int { return replayRejects(ctx, c, p) },
	}
}

// replayRun is one run of rejects replay: what it chose, who runs it, and what it did so far.
type replayRun struct {
	c        *line
	l        *ledger.Ledger
	flags    replayFlags
	sel      ledger.RejectSelection
	account  string
	opts     ledger.ReplayOptions
	report   replayReport
	table    *tabwriter.Writer
	js       jetstream.JetStream // nil: the relay rounds of the roles publish
	selected int64               // the rejects --reason and --since choose, before --account
	read     int
	noted    time.Time
}

func replayRejects(ctx context.Context, c *line, p replayFlags) int {
	r := &replayRun{c: c, flags: p}
	r.sel.Reason = strings.TrimSpace(p.reason)
	switch {
	case c.given("reason") && !identity.Reason(r.sel.Reason).Valid():
		return c.usageError("--reason %q: give one of %s", p.reason, strings.Join(rejectReasons(), ", "))
	case c.given("account") && strings.TrimSpace(p.account) == "":
		return c.usageError("--account is empty: name the account, or leave the flag out for every account")
	case p.limit < 0:
		return c.usageError("--limit %d: give at least 1, or leave the flag out for every reject", p.limit)
	}
	r.account = p.account
	if c.given("since") {
		t, err := parseSince(p.since, time.Now())
		if err != nil {
			return c.usageError("--since %q: %v", p.since, err)
		}
		r.sel.Since = t
	}
	reason := strings.TrimSpace(c.reason)
	if reason == "" {
		return c.usageError("--reason-text is required: say why, for the control history")
	}
	operator, err := operatorName(c.io, c.operator)
	if err != nil {
		return c.usageError("%v", err)
	}
	r.opts = ledger.ReplayOptions{Actor: operator, Reason: reason, Again: p.again, DryRun: p.dryRun}
	r.report = replayReport{DryRun: p.dryRun, Again: p.again, Operator: operator, Reason: reason, Event: "none", Rejects: []replayedJSON{}}

	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	r.l = l
	if r.selected, err = l.CountRejectsToReplay(ctx, r.sel); err != nil {
		return c.fail(err)
	}
	if url := strings.TrimSpace(p.natsURL); url != "" && !p.dryRun {
		nc, err := connectNATS(url)
		if err == nil {
			defer nc.Close()
			r.js, err = jetstream.New(nc)
		}
		if err != nil {
			// The replay does not need NATS: the relay rounds of the roles publish what it creates.
			r.report.EventError = err.Error()
			c.note("%v (the created intents' events and work items wait in the outbox for the next relay round)", err)
		}
	}
	if !c.asJSON {
		r.table = tabwriter.NewWriter(c.io.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(r.table, "SEQ\tREASON\tACCOUNT\tOUTCOME\tNOW")
	}
	if err := r.all(ctx); err != nil {
		r.flush()
		t := r.report.Totals
		return c.fail(fmt.Errorf("%w; the pages before it stand: %d rejects replayed (created %d, already stored %d, refused %d, skipped %d, not replayable %d)",
			err, t.Sum(), t.Created, t.AlreadyStored, t.Refused, t.Skipped, t.NotReplayable))
	}
	if c.asJSON {
		return writeJSON(c.io, r.report)
	}
	r.flush()
	r.summary(c.io.Stdout)
	return ExitOK
}

// all replays every chosen reject, a page at a time.
func (r *replayRun) all(ctx context.Context) error {
	after := ledger.RejectCursor{}
	for {
		page, err := r.l.RejectsToReplay(ctx, r.sel, after, replayPaging.page)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return nil
		}
		last := page[len(page)-1]
		after = ledger.RejectCursor{Stream: last.Stream, Seq: last.StreamSeq}
		r.read += len(page)
		done, err := r.page(ctx, page)
		if err != nil {
			return err
		}
		r.progress(done)
		if done {
			return nil
		}
	}
}

// page replays one page of rejects in one transaction (ingest.ReplayPage) and reports each;
// done is true when --limit is reached.
func (r *replayRun) page(ctx context.Context, page []ledger.ReplayCandidate) (done bool, err error) {
	max := 0
	if r.flags.limit > 0 {
		max = r.flags.limit - r.report.Totals.Sum()
	}
	replayed, done, err := ingest.ReplayPage(ctx, r.l, page, r.account, max, r.opts)
	if err != nil {
		return false, err
	}
	for _, rep := range replayed {
		line := replayLine(rep.Reject, rep.Outcome)
		line.Why = rep.Why
		res := rep.Result
		line.Account = res.Account
		if res.Key != nil {
			line.DeliveryKey = res.Key.String()
		}
		if res.Refusal != nil {
			line.ReasonNow, line.DetailNow = string(res.Refusal.Reason), ledger.StoredText(res.Refusal.Detail)
		}
		if m := res.Replayed; m != nil {
			at := m.At
			line.ReplayedBy, line.ReplayedAt = m.Actor, &at
		}
		r.report.Totals.Add(line.Outcome)
		r.report.Rejects = append(r.report.Rejects, line)
		r.row(line)
	}
	r.publish(ctx, ingest.Created(replayed, r.opts.DryRun))
	return done, nil
}

// publish puts the created intents' events and work items on the streams right away when a
// NATS server is named; the outbox keeps them for the relay otherwise, or when that fails.
func (r *replayRun) publish(ctx context.Context, keys []identity.DeliveryKey) {
	if len(keys) == 0 {
		return
	}
	if r.js == nil {
		r.report.Event = "outbox"
		return
	}
	if r.report.Event == "none" {
		r.report.Event = "published"
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := relay.New(r.l, r.js, relay.Config{AckTimeout: 10 * time.Second}).AfterCommit(ctx, keys); err != nil {
		r.report.Event, r.report.EventError = "outbox", err.Error()
		r.c.note("the replay is made, but publishing the created intents' events failed: %v (they stay in the outbox: the next relay round publishes them)", err)
	}
}

func replayLine(r ledger.ReplayCandidate, outcome string) replayedJSON {
	return replayedJSON{ID: r.ID, Stream: r.Stream, StreamSeq: r.StreamSeq, At: r.At, Reason: r.Reason, Outcome: outcome}
}

// row prints one reject's line of the table.
func (r *replayRun) row(j replayedJSON) {
	if r.table == nil {
		return
	}
	now := j.DeliveryKey
	switch j.Outcome {
	case string(ledger.ReplayRefused):
		now = j.ReasonNow + ": " + oneLine(ledger.ParseStoredText(j.DetailNow), 160)
	case string(ledger.ReplaySkipped):
		now = fmt.Sprintf("replayed %s by %s: %s", timestamp(*j.ReplayedAt), j.ReplayedBy, j.DeliveryKey)
	case ingest.NotReplayable:
		now = j.Why
	}
	account := j.Account
	if account == "" {
		account = "-"
	}
	fmt.Fprintf(r.table, "%d\t%s\t%s\t%s\t%s\n", j.StreamSeq, j.Reason, oneLine(account, 40), strings.ReplaceAll(j.Outcome, "_", " "), now)
}

func (r *replayRun) flush() {
	if r.table != nil {
		_ = r.table.Flush()
	}
}

// progress notes how far a long run got, after a page, at most every replayPaging.progress;
// the last page's is the summary's.
func (r *replayRun) progress(done bool) {
	if done || int64(r.read) >= r.selected || time.Since(r.noted) < replayPaging.progress {
		return
	}
	r.flush()
	r.noted = time.Now()
	t := r.report.Totals
	r.c.note("progress: %d of %d rejects read: created %d, already stored %d, refused %d, skipped %d, not replayable %d",
		r.read, r.selected, t.Created, t.AlreadyStored, t.Refused, t.Skipped, t.NotReplayable)
}

// summary says what the run did, and where the created intents' events go.
func (r *replayRun) summary(w stdio.Writer) {
	t := r.report.Totals
	verb := "replayed"
	if r.opts.DryRun {
		verb = "would replay"
	}
	n := t.Sum() - t.Skipped - t.NotReplayable
	fmt.Fprintf(w, "%s %d %s: created %d, already stored %d, refused again %d; skipped %d (replayed before; --again replays them); not replayable %d\n",
		verb, n, plural(n, "reject", "rejects"), t.Created, t.AlreadyStored, t.Refused, t.Skipped, t.NotReplayable)
	switch {
	case r.opts.DryRun:
		fmt.Fprintln(w, "dry run: nothing was changed")
	case r.report.Event == "published":
		fmt.Fprintln(w, "the created intents' events and work items are published on ATMOST_EVENTS and ATMOST_DISPATCH")
	case r.report.Event == "outbox":
		fmt.Fprintln(w, "the created intents' events and work items are published by the next relay round (a running ingest or sweeper drains the outbox)")
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
